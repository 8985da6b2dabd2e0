module chaosharness/reaper

go 1.22
