package services

import (
	"context"
	"fmt"
	"os"

	"citizen/model/catalog"
)

func init() {
	extraCommands["models"] = extraCommand{summary: "the models citizen can serve (models list | fetch [NAME] | path [NAME])", run: cmdModels}
}

// cmdModels lists the catalogue, fetches a model into the model cache, or
// prints where its files are (fetching them first).
func cmdModels(ctx context.Context, args []string, env Env) error {
	if len(args) == 0 {
		return usageError{"usage: citizen models list | fetch [NAME] | path [NAME]"}
	}
	name := catalog.Default
	if len(args) > 1 {
		name = args[1]
	}
	switch args[0] {
	case "list":
		cache := catalog.CacheDir()
		for _, m := range catalog.Models {
			state := "built in"
			if m.Format == "gguf" {
				state = "not fetched"
				if st, err := os.Stat(catalog.Path(m, cache)); err == nil && st.Size() == m.Size {
					state = "fetched: " + catalog.Path(m, cache)
				}
			}
			def := ""
			if m.Name == catalog.Default {
				def = " (default)"
			}
			fmt.Fprintf(env.Stdout, "%-24s %s%s, %s; %s\n", m.Name, m.Display, def, m.License, state)
		}
		fmt.Fprintf(env.Stdout, "model cache: %s (set CITIZEN_MODEL_CACHE to move it)\n", cache)
		return nil
	case "fetch", "path":
		m, err := catalog.Lookup(name)
		if err != nil {
			return err
		}
		path, err := catalog.Ensure(ctx, m, catalog.Options{Progress: env.Stderr})
		if err != nil {
			return err
		}
		fmt.Fprintln(env.Stdout, path)
		return nil
	}
	return usageError{"usage: citizen models list | fetch [NAME] | path [NAME]"}
}
