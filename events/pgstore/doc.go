// Package pgstore is the events.Store backend on PostgreSQL (placeholder doc).
package pgstore
