// Package learn is `citizen bench learn`: it runs citizen in-process on
// the tiny model, drives it with the simulated workplace (drift, tool
// faults, poisoning, a bad candidate) and reports what the learning loop
// did: accuracy and reward per type and window, the changed questions of
// each drift by fast memory and by the weights, preference changes,
// lessons, training cycles and rollouts, the paired quiz against the base,
// and the must-shows computed from these (mustshow.go). Nothing
// here asserts a must-show; the tests check the mechanisms.
package learn
