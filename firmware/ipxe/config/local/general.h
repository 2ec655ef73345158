/* siteboot iPXE builds: features on top of iPXE's defaults. */

/* Every secret after the firmware stage travels over HTTPS, on BIOS too. */
#undef DOWNLOAD_PROTO_HTTPS
#define DOWNLOAD_PROTO_HTTPS
#undef NET_PROTO_IPV6
#define NET_PROTO_IPV6

/* Certificate times need a clock; VLAN for tagged provisioning segments. */
#undef NTP_CMD
#define NTP_CMD
#undef VLAN_CMD
#define VLAN_CMD
#undef CERT_CMD
#define CERT_CMD

/* EAPOL breaks DHCP on some NICs and sends MAB ports to a dead VLAN. */
#undef NET_PROTO_EAPOL

/* Unused download protocols and SAN boot stay out. */
#undef SANBOOT_PROTO_ISCSI
#undef SANBOOT_PROTO_AOE
#undef SANBOOT_PROTO_IB_SRP
#undef SANBOOT_PROTO_FCP
#undef SANBOOT_PROTO_HTTP
#undef HTTP_AUTH_NTLM
