package cli

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"

	"citizen/model"
	"citizen/model/catalog"
	"citizen/model/chat"
	"citizen/pretrain"
	"citizen/services"
)

func init() {
	extraCommands["models"] = extraCommand{summary: "the models citizen can serve (models list | fetch [NAME] | path [NAME] | card [NAME] [--per-type N])", run: cmdModels}
}

// cmdModels lists the catalogue, fetches a model into the model cache, or
// prints where its files are (fetching them first).
func cmdModels(ctx context.Context, args []string, env services.Env) error {
	if len(args) == 0 {
		return services.UsageError{Msg: "usage: citizen models list | fetch [NAME] | path [NAME]"}
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
		_, path, err := ensureModel(ctx, name, env)
		if err != nil {
			return err
		}
		fmt.Fprintln(env.Stdout, path)
		return nil
	case "card":
		return cmdModelCard(ctx, args[1:], env)
	}
	return services.UsageError{Msg: "usage: citizen models list | fetch [NAME] | path [NAME] | card [NAME] [--per-type N]"}
}

// cmdModelCard prints a model's card: where it comes from, its licence
// and checksum, and its accuracy per workplace task type (fresh workplace
// conversations with the workplace's system prompt, greedy decoding,
// graded by the workplace's checkers).
func cmdModelCard(ctx context.Context, args []string, env services.Env) error {
	fs := flag.NewFlagSet("models card", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	perType := fs.Int("per-type", 20, "workplace conversations per task type")
	seed := fs.Int64("seed", 7, "workplace seed")
	name := catalog.Default
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	m, path, err := ensureModel(ctx, name, env)
	if err != nil {
		return err
	}
	cm, err := chat.Open(path, model.EngineConfig{})
	if err != nil {
		return err
	}
	defer cm.Close()
	start := time.Now()
	acc, n, err := pretrain.EvaluateChat(ctx, cm, *perType, *seed)
	if err != nil {
		return err
	}
	w := env.Stdout
	fmt.Fprintf(w, "# %s\n\n- name in citizen: `%s`\n- source: %s\n- licence: %s\n", m.Display, m.Name, m.Source, m.License)
	if m.MemberSHA256 != "" {
		fmt.Fprintf(w, "- file: `%s` (%d bytes), sha256 `%s`\n", m.Member, m.Size, m.MemberSHA256)
	}
	fmt.Fprintf(w, "- parameters: %d; tokenizer %s\n\n", cm.Engine.Model().Config.NumParams(), cm.Tok.Name())
	fmt.Fprintf(w, "Workplace accuracy per task type: fresh conversations (seed %d) with the workplace's system prompt, greedy decoding, graded by the workplace's checkers; %s on %d cores.\n\n",
		*seed, time.Since(start).Round(time.Second), runtime.NumCPU())
	fmt.Fprintf(w, "Reproduce: `citizen models card %s --per-type %d --seed %d`\n\n| type | accuracy | n |\n|---|---|---|\n", m.Name, *perType, *seed)
	types := make([]string, 0, len(acc))
	for t := range acc {
		types = append(types, t)
	}
	sort.Strings(types)
	for _, t := range types {
		fmt.Fprintf(w, "| %s | %.2f | %d |\n", t, acc[t], n[t])
	}
	return nil
}

// ensureModel looks name up in the catalogue and fetches it into the model
// cache if it is not there yet (progress on stderr), returning its path.
func ensureModel(ctx context.Context, name string, env services.Env) (catalog.Model, string, error) {
	m, err := catalog.Lookup(name)
	if err != nil {
		return catalog.Model{}, "", err
	}
	path, err := catalog.Ensure(ctx, m, catalog.Options{Progress: env.Stderr})
	return m, path, err
}
