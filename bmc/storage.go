package bmc

import (
	"context"
	"slices"
	"strconv"
)

// RAID levels a VolumeSpec may ask for (Redfish RAIDType).
var RAIDTypes = []string{"RAID0", "RAID1", "RAID5", "RAID6", "RAID10", "RAID50", "RAID60", "RAID1E", "RAID00"}

// Volume is a logical volume of a storage controller.
type Volume struct {
	// Controller is the BMC's id of its storage controller; ID the volume's id there.
	Controller string
	ID         string
	Name       string
	// RAIDType is the RAID level ("RAID1", ...), "" when the BMC does not say.
	RAIDType      string
	CapacityBytes int64
	// Drives are the ids of the drives it spans.
	Drives []string
}

// VolumeSpec is a volume to create.
type VolumeSpec struct {
	// Controller is the storage controller's id; "" means the system's only one with
	// volumes.
	Controller string
	// Name is the volume's name; optional.
	Name string
	// RAIDType is the RAID level, one of RAIDTypes. Required.
	RAIDType string
	// Drives are the ids of the drives (the controller's, Redfish Drive Id). Required.
	Drives []string
	// CapacityBytes is the size; zero lets the controller use all it can.
	CapacityBytes int64
}

// Validate reports an ErrInvalid error for a spec no BMC accepts.
func (s VolumeSpec) Validate() error {
	bad := func(msg string) error { return &OpError{Op: "create-volume", Kind: ErrInvalid, Message: msg} }
	switch {
	case !slices.Contains(RAIDTypes, s.RAIDType):
		return bad("unknown RAID type " + quote(s.RAIDType))
	case len(s.Drives) == 0:
		return bad("a volume needs drives")
	case s.CapacityBytes < 0:
		return bad("negative capacity")
	case len(s.Controller) > MaxIDLen || len(s.Name) > MaxIDLen:
		return bad("controller or name too long")
	}
	for _, d := range s.Drives {
		if d == "" || len(d) > MaxIDLen {
			return bad("a drive id is empty or too long")
		}
	}
	return nil
}

// StorageManager creates and deletes a machine's volumes and erases its drives. Each
// change is read back: a volume created with another RAID level, drives or a smaller
// capacity than asked is ErrDiffers (the volume exists: it is not created again), a
// volume still listed after its deletion is ErrDiffers. A controller or drive the BMC
// does not offer the operation for is ErrUnsupported, with nothing sent.
type StorageManager interface {
	// Volumes lists the volumes of a controller ("" for every controller).
	Volumes(ctx context.Context, controller string) ([]Volume, error)
	// CreateVolume creates a volume and returns it as read back.
	CreateVolume(ctx context.Context, spec VolumeSpec) (Volume, error)
	// DeleteVolume deletes a volume, confirmed by reading the controller's volumes.
	DeleteVolume(ctx context.Context, controller, id string) error
	// EraseDrive erases a drive: its SecureErase, or, where the drive has none, the
	// Initialize of the volume it belongs to (a volume of that drive alone).
	EraseDrive(ctx context.Context, controller, drive string) error
}

// CapVolumes is the capability of the storage changes: StorageManager.
const CapVolumes Capability = "volumes"

// CreateVolume creates a volume. Destructive (kind bmc.storage). Its value is the Volume
// read back.
type CreateVolume struct{ Spec VolumeSpec }

func (CreateVolume) Kind() Kind             { return KindStorage }
func (CreateVolume) Name() string           { return "create-volume" }
func (CreateVolume) Capability() Capability { return CapVolumes }
func (o CreateVolume) Validate() error      { return o.Spec.Validate() }
func (o CreateVolume) do(ctx context.Context, d Driver) (any, error) {
	return d.(StorageManager).CreateVolume(ctx, o.Spec)
}

// DeleteVolume deletes a volume. Destructive (kind bmc.storage).
type DeleteVolume struct{ Controller, Volume string }

func (DeleteVolume) Kind() Kind             { return KindStorage }
func (DeleteVolume) Name() string           { return "delete-volume" }
func (DeleteVolume) Capability() Capability { return CapVolumes }
func (o DeleteVolume) Validate() error {
	if o.Volume == "" || len(o.Volume) > MaxIDLen || len(o.Controller) > MaxIDLen {
		return &OpError{Op: o.Name(), Kind: ErrInvalid, Message: "a volume id is required (and short)"}
	}
	return nil
}
func (o DeleteVolume) do(ctx context.Context, d Driver) (any, error) {
	return nil, d.(StorageManager).DeleteVolume(ctx, o.Controller, o.Volume)
}

// EraseDrive erases a drive. Destructive (kind bmc.storage).
type EraseDrive struct{ Controller, Drive string }

func (EraseDrive) Kind() Kind             { return KindStorage }
func (EraseDrive) Name() string           { return "erase-drive" }
func (EraseDrive) Capability() Capability { return CapVolumes }
func (o EraseDrive) Validate() error {
	if o.Drive == "" || len(o.Drive) > MaxIDLen || len(o.Controller) > MaxIDLen {
		return &OpError{Op: o.Name(), Kind: ErrInvalid, Message: "a drive id is required (and short)"}
	}
	return nil
}
func (o EraseDrive) do(ctx context.Context, d Driver) (any, error) {
	return nil, d.(StorageManager).EraseDrive(ctx, o.Controller, o.Drive)
}

// Storage actions of Args.StorageAction for KindStorage.
const (
	StorageList         = "list" // or ""
	StorageCreateVolume = "create-volume"
	StorageDeleteVolume = "delete-volume"
	StorageEraseDrive   = "erase-drive"
)

// IsDestructive reports whether op changes the machine or its BMC, and so is journaled
// and claimed before it is sent: its kind's Destructive, but for ListStorage, the one
// operation of a destructive kind (bmc.storage) that only reads.
func IsDestructive(op Op) bool {
	if _, ok := op.(ListStorage); ok {
		return false
	}
	return op.Kind().Destructive()
}

func parseStorage(a Args) (Op, error) {
	switch a.StorageAction {
	case "", StorageList:
		return ListStorage{}, nil
	case StorageCreateVolume:
		return CreateVolume{Spec: VolumeSpec{Controller: a.Controller, Name: a.VolumeName, RAIDType: a.RAIDType,
			Drives: slices.Clone(a.Drives), CapacityBytes: a.CapacityBytes}}, nil
	case StorageDeleteVolume:
		return DeleteVolume{Controller: a.Controller, Volume: a.Volume}, nil
	case StorageEraseDrive:
		drive := ""
		if len(a.Drives) == 1 {
			drive = a.Drives[0]
		}
		return EraseDrive{Controller: a.Controller, Drive: drive}, nil
	}
	return nil, &OpError{Op: "storage", Kind: ErrInvalid, Message: "unknown storage action " + quote(a.StorageAction) + " (want " +
		strconv.Quote(StorageList) + ", create-volume, delete-volume or erase-drive)"}
}
