// Package services is citizen's composition root. App builds one
// process's components from its Config, as modules in dependency order
// (internal/modules): the store, the bus and its relay, the engine, the
// gateway, reflection, feedback, memory, lessons, the distiller, the
// rollout controller and the inference server; --target chooses which
// run. Config composes each component's own settings (each validated by
// its package) with the process's choices, and Serve is `citizen serve`.
// scaleout.go refuses deployments that could not be consistent and
// elects the roles that run once per store. The command line around it
// is package cli.
package services
