#!/bin/sh
# Figures for package discovery: Go benchmarks of Seen, Snapshot, Merge and Match, and the
# 1,000,000-sighting flood (heap growth measured with runtime.MemStats, report calls on fake
# time). Run from the repository root. COUNT sets the benchmark repetitions (default 5);
# quote medians, these machines are shared.
set -eu
count=${COUNT:-5}
go test -run '^$' -bench . -benchmem -benchtime 1s -count "$count" ./discovery/
go test -count=1 -run '^TestFlood$' -v ./discovery/ | grep -E 'flood:|^(---|ok|FAIL)'
