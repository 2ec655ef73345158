#!/bin/sh
# Measures Issuer.Issue and Verifier.Verify against bare ed25519.Sign and ed25519.Verify,
# interleaved call by call in one benchmark (BenchmarkRatio) and timed by the benchmark
# thread's own CPU clock, COUNT times, and prints the median of each ratio. Run from the repository root:
#
#	bench/assertion/ratio.sh [COUNT] [ITERATIONS]
#
# Wall-clock times swing with other load on a shared machine; thread CPU time does much
# less, and the median of several runs is the figure to quote.
set -eu
count=${1:-9}
iters=${2:-20000}
go test -run '^$' -bench 'Ratio' -benchtime "${iters}x" -count "$count" ./assertion/ |
	awk '
	/^BenchmarkRatio\// {
		split($1, name, "/"); sub(/-[0-9]+$/, "", name[2])
		for (i = 3; i < NF; i++) {
			if ($(i+1) == "ratio") r[name[2]] = r[name[2]] " " $i
			if ($(i+1) == "bare-cpu-ns/op") b[name[2]] = b[name[2]] " " $i
			if ($(i+1) == "ours-cpu-ns/op") o[name[2]] = o[name[2]] " " $i
		}
	}
	function median(s,   a, n, i, j, t) {
		n = split(s, a, " ")
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	END {
		for (k in r) printf "%-7s median of %d runs: bare %.0f CPU ns/op, ours %.0f CPU ns/op, ratio %.3f (all: %s)\n", k, split(r[k], x, " "), median(b[k]), median(o[k]), median(r[k]), r[k]
	}'
