// Package bench is `citizen bench`: learn (package bench/learn) and
// gateway (package bench/hotpath run against this binary).
package bench
