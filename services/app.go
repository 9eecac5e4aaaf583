package services

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"citizen/distill"
	"citizen/events"
	"citizen/events/bus"
	"citizen/events/bus/transport"
	"citizen/events/stores"
	"citizen/gateway"
	"citizen/gateway/embedded"
	"citizen/internal/modules"
	"citizen/memory"
	"citizen/memory/lessons"
	"citizen/memory/qdrant"
	"citizen/model"
	"citizen/model/catalog"
	"citizen/model/chat"
	"citizen/ops"
	"citizen/ops/rollout"
	"citizen/reflection"
	"citizen/reflection/feedback"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
)

// App is one citizen process: its configuration and the components its
// modules build. Modules fill the fields in dependency order; a module
// reads only fields of modules it depends on.
type App struct {
	Config Config
	Log    *slog.Logger

	Store  events.Store
	Bus    transport.Bus
	relay  *bus.Relay // the bus's relay (it runs while this process holds the lease)
	Engine gateway.Engine
	// Embedded is set when the engine is the embedded model.
	Embedded *embedded.Engine
	Gateway  *gateway.Server
	Memory   memory.Index
	Embedder memory.Embedder
	// Lessons is the process's view of the lessons (nil with fast memory
	// off): the gateway's fast memory and reflection's references.
	Lessons     *lessons.View
	lessonsOnce sync.Once
	Indexer     *memory.Indexer
	Failures    *memory.FailureLog
	// Scoreboard is reflection's live aggregate per (type, version).
	Scoreboard *reflection.Scoreboard
	// rubricStore holds reflection.rubrics once loaded: the evaluator
	// grades by it and the distiller checks its own answers and grades
	// the suite by it.
	rubricStore *reflection.RubricStore
	Distiller   *distill.Distiller
	Rollout     *rollout.Controller
	// localLeaser elects within this process when the store offers no
	// lease of its own (leaser).
	localLeaser *events.LocalLeaser

	// Progress receives long-running start-up work's progress lines (the
	// first fetch of a model); nil is silent.
	Progress io.Writer
	// checkpointPath is the resolved embedded checkpoint (checkpoint).
	checkpointPath string

	// Metrics is the process's Prometheus registry, served by the gateway
	// at /metrics; components register their own metrics on it.
	Metrics gateway.Registry

	workerMetricsOnce sync.Once
	workerMetricsV    *workerMetrics
	workerMetricsErr  error

	// WrapTrainer, when set, wraps the trainer the distiller is configured
	// with (distill.command's, else the embedded one): how a harness such
	// as bench learn decorates training without the distiller knowing.
	// The distiller gives the parent's directory only to a
	// *distill.CommandTrainer it holds itself, not to one wrapped.
	WrapTrainer func(distill.Trainer) distill.Trainer
}

// Modules returns the components of a. Their names are the --target values
// (and the list in --target's help); a module's dependencies start with it.
func (a *App) Modules() []modules.Module {
	return []modules.Module{
		{Name: "store", Init: a.initStore},
		{Name: "bus", Deps: []string{"store"}, Init: a.initBus},
		{Name: "engine", Deps: []string{"store"}, Init: a.initEngine},
		{Name: "gateway", Deps: []string{"store", "engine", "scoreboard"}, Init: a.initGateway},
		{Name: "scoreboard", Deps: []string{"store"}, Init: a.initScoreboard},
		{Name: "reflection", Deps: []string{"store", "bus", "memory", "scoreboard"}, Init: a.initReflection},
		{Name: "feedback", Deps: []string{"store", "bus"}, Init: a.initFeedback},
		{Name: "memory", Deps: []string{"store", "bus"}, Init: a.initMemory},
		{Name: "lessons", Deps: []string{"store", "bus"}, Init: a.initLessons},
		{Name: "distiller", Deps: []string{"store", "engine", "memory"}, Init: a.initDistiller},
		{Name: "rollout", Deps: []string{"store"}, Init: a.initRollout},
		{Name: "inference", Init: a.initInference, NotInAll: true},
	}
}

// logger is the log of the module named name (its --target name); the
// packages it builds name their own parts with "component".
func (a *App) logger(name string) *slog.Logger { return a.Log.With("module", name) }

// embedder returns the memory embedder, creating it on first use: the
// memory index and POST /v1/embeddings share it, so a client's vectors
// compare with the index's.
func (a *App) embedder() memory.Embedder {
	if a.Embedder == nil {
		a.Embedder = memory.NewHashEmbedder(a.Config.Memory.Dim)
	}
	return a.Embedder
}

// metrics returns the process registry, creating it on first use.
func (a *App) metrics() gateway.Registry {
	if a.Metrics == nil {
		a.Metrics = prometheus.NewRegistry()
	}
	return a.Metrics
}

func (a *App) initStore(ctx context.Context) (modules.Service, error) {
	if err := a.checkDeployment(); err != nil {
		return nil, err
	}
	st, err := stores.Open(a.Config.Store, a.Config.DataDir, a.logger("store"))
	if err != nil {
		return nil, err
	}
	a.Store = st
	return modules.Closer(st.Close), nil
}

// initBus starts the bus (in-process, or Kafka) and the relay that feeds
// it from the store (its checkpoint is "relay"). The relay runs only
// while this process holds the relay lease: one relay per store.
func (a *App) initBus(ctx context.Context) (modules.Service, error) {
	log := a.logger("bus")
	b, err := transport.Open(a.Config.Bus, log)
	if err != nil {
		return nil, err
	}
	a.Bus = b
	relay, err := bus.NewRelay(a.Store, a.Bus.Publisher(), bus.RelayConfig{Name: leaseRelay}, log)
	if err != nil {
		return nil, err
	}
	a.relay = relay
	l, err := a.leaser()
	if err != nil {
		return nil, err
	}
	return &relayService{bus: a.Bus, started: make(chan struct{}), run: func(ctx context.Context) error {
		return events.RunLeased(ctx, l, leaseRelay, log, relay.Run)
	}}, nil
}

// relayService runs the relay once every module is initialised (every
// worker has reserved its consumer group), and closes the bus on Stop.
type relayService struct {
	run     func(ctx context.Context) error // the relay, elected
	bus     transport.Bus
	started chan struct{}
	once    sync.Once
}

func (s *relayService) AllStarted() { s.once.Do(func() { close(s.started) }) }

func (s *relayService) Run(ctx context.Context) error {
	select {
	case <-s.started:
	case <-ctx.Done():
		return nil
	}
	return s.run(ctx)
}

func (s *relayService) Stop(context.Context) error { return s.bus.Close() }

// checkpoint resolves the embedded model's files once: model.checkpoint
// when set, else model.name from the catalogue (fetching it into the model
// cache the first time, with progress on the log's writer).
func (a *App) checkpoint(ctx context.Context) (string, error) {
	if a.checkpointPath != "" {
		return a.checkpointPath, nil
	}
	mc := a.Config.Model
	if mc.Checkpoint != "" {
		a.checkpointPath = mc.Checkpoint
		return a.checkpointPath, nil
	}
	m, err := catalog.Lookup(mc.Name)
	if err != nil {
		return "", fmt.Errorf("engine: model.name: %w", err)
	}
	path, err := catalog.Ensure(ctx, m, catalog.Options{Progress: a.Progress})
	if err != nil {
		return "", fmt.Errorf("engine: %w", err)
	}
	a.checkpointPath = path
	return path, nil
}

// baseModel is what adapters name as their base (PEFT's
// base_model_name_or_path): the catalog model's repository, or the
// checkpoint's path.
func (a *App) baseModel() string {
	if a.Config.Model.Checkpoint != "" {
		return a.Config.Model.Checkpoint
	}
	if m, err := catalog.Lookup(a.Config.Model.Name); err == nil && m.BaseModel != "" {
		return m.BaseModel
	}
	return a.Config.Model.Name
}

func (a *App) modelName() string {
	if a.Config.Model.Checkpoint != "" {
		return filepath.Base(a.Config.Model.Checkpoint)
	}
	return a.Config.Model.Name
}

func (a *App) initEngine(ctx context.Context) (modules.Service, error) {
	mc := a.Config.Model
	switch mc.Engine {
	case "stub":
		a.Engine = gateway.NewStubEngine()
		return nil, nil
	case "upstream":
		return a.initUpstream(ctx)
	}
	log := a.logger("engine")
	path, err := a.checkpoint(ctx)
	if err != nil {
		return nil, err
	}
	cm, err := chat.Open(path, model.EngineConfig{})
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	a.Embedded = embedded.New(cm, embedded.Config{DefaultTemperature: mc.Temperature})
	a.Engine = a.Embedded
	if err := a.metrics().Register(a.Embedded); err != nil {
		return nil, fmt.Errorf("engine: metrics: %w", err)
	}
	log.Info("embedded model loaded", "model", a.modelName(), "checkpoint", path, "parameters", cm.Engine.Model().Config.NumParams(), "tokenizer", cm.Tok.Name())
	// Serve every accepted version: load each adapter as weights.trained
	// events arrive (from the start of the store).
	return modules.WithStop(
		func(ctx context.Context) error {
			err := distill.SyncVersions(ctx, a.Store, a.Embedded, filepath.Join(a.Config.DataDir, "distill"), cm.Engine.Model().Config, log)
			if ctx.Err() != nil {
				return nil
			}
			return err
		},
		func(context.Context) error { cm.Close(); return nil },
	), nil
}

func (a *App) initGateway(ctx context.Context) (modules.Service, error) {
	cfg := a.Config.Gateway
	cfg.StableVersion, cfg.ShutdownTimeout = a.Config.Rollout.Stable, a.Config.ShutdownTimeout
	if cfg.KeysFile == "" {
		cfg.KeysFile = filepath.Join(a.Config.DataDir, "keys.json")
	}
	oh, err := ops.New(ops.Deps{Store: a.Store, Rollout: a.Config.Rollout, Logger: a.logger("ops"), Caller: opsCaller})
	if err != nil {
		return nil, err
	}
	blog := a.logger("backlog")
	watch, err := transport.NewBacklogWatch(transport.WatchConfig{Store: a.Store, Max: a.Config.Bus.MaxBacklog, Groups: workerTopics(), RelayCheckpoint: leaseRelay},
		a.metrics(), blog)
	if err != nil {
		return nil, err
	}
	ready := func() error { return errors.Join(a.storeReady(), watch.Err()) }
	srv, err := gateway.New(cfg, gateway.Deps{Store: a.Store, Engine: a.Engine, Logger: a.logger("gateway"), Registry: a.metrics(),
		Routes: func(v1 *echo.Group) { a.opsRoutes(v1); oh.RegisterAPI(v1) }, Pages: func(e *echo.Echo) { oh.RegisterPages(e) },
		OnShutdown: oh.CloseStreams, Ready: ready, Admit: watch.Err, Lessons: a.lessonSource(ctx), Embedder: a.embedder()})
	if err != nil {
		return nil, err
	}
	a.Gateway = srv
	return &gatewayService{srv: srv, watch: watch, source: a.backlogSource, log: blog, ready: make(chan struct{})}, nil
}

// worker runs one consumer group's handlers on its own router.
func (a *App) worker(name string, handlers ...bus.EventHandler) (modules.Service, error) {
	log := a.logger(name)
	m, err := a.workerMetrics()
	if err != nil {
		return nil, err
	}
	poison := poisonCounter{a.Bus.Publisher(), m.poison.WithLabelValues(name)}
	r, err := bus.NewRouter(bus.RouterConfig{Poison: poison, MaxAttempts: a.Config.Bus.MaxAttempts}, log)
	if err != nil {
		return nil, err
	}
	for _, h := range handlers {
		if err := bus.AddEventHandler(r, m.observe(h)); err != nil {
			return nil, err
		}
	}
	return routerService{r}, nil
}

type routerService struct{ r *message.Router }

func (s routerService) Run(ctx context.Context) error {
	err := s.r.Run(ctx)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func (a *App) initFeedback(ctx context.Context) (modules.Service, error) {
	interp, err := feedback.NewInterpreter(a.Config.Feedback)
	if err != nil {
		return nil, fmt.Errorf("feedback: %w", err)
	}
	in := feedback.NewIngester(feedback.IngesterConfig{Reader: a.Store, Interpreter: interp}, a.logger("feedback"))
	return a.worker("feedback", bus.EventHandler{
		Name: "feedback", Topics: topicsOf(groupFeedback),
		Subscriber: a.Bus.Subscriber("feedback"), Store: a.Store, Handle: in.Handle,
	})
}

func (a *App) initMemory(ctx context.Context) (modules.Service, error) {
	mc := a.Config.Memory
	log := a.logger("memory")
	var ix memory.Index
	var emb *memory.Embedded
	switch mc.Backend {
	case "qdrant":
		q, err := qdrant.Open(mc.QdrantURL)
		if err != nil {
			return nil, err
		}
		ix = q
	default:
		emb = memory.NewEmbedded(memory.EmbeddedConfig{})
		ix = emb
	}
	a.Memory = ix
	a.Failures = memory.NewFailureLog(0, 0)
	a.embedder()
	idx, err := memory.NewIndexer(ctx, ix, a.Embedder, a.Store, a.Failures)
	if err != nil {
		return nil, err
	}
	a.Indexer = idx
	if err := a.metrics().Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "citizen_memory_indexer_lag_seconds",
		Help: "Age of the last event the memory indexer handled, when it handled it.",
	}, func() float64 { return idx.Lag().Seconds() })); err != nil {
		return nil, err
	}
	// The embedded index is kept as a snapshot under the data directory:
	// load it and catch up from the position it reflects; when it is
	// missing or unusable, rebuild from the whole store.
	snap := filepath.Join(a.Config.DataDir, "memory", "snapshot")
	var after uint64
	if emb != nil {
		switch p, err := emb.LoadSnapshot(snap); {
		case err == nil:
			after = p
		case errors.Is(err, os.ErrNotExist):
		default:
			log.Warn("memory snapshot unusable; rebuilding from the store", "err", err)
		}
	}
	n, pos, err := idx.Rebuild(ctx, a.Store, after)
	if err != nil {
		return nil, fmt.Errorf("memory: rebuilding from the store: %w", err)
	}
	log.Info("memory caught up with the store", "from", after, "to", pos, "interactions", n)
	types := memory.IndexedTypes
	var svc modules.Service
	if emb != nil {
		// The embedded index is this process's own projection: it follows
		// the store (a consumer group would share the events among the
		// processes, each index getting a part).
		svc = modules.Func(func(ctx context.Context) error { return followStore(ctx, a.Store, pos, types, idx.Handle, log) })
	} else {
		svc, err = a.worker("memory", bus.EventHandler{Name: "memory", Topics: topicsOf(types),
			Subscriber: a.Bus.Subscriber("memory"), Store: a.Store, Handle: idx.Handle})
		if err != nil {
			return nil, err
		}
	}
	stop := func(context.Context) error {
		if emb != nil {
			// Everything up to pos was indexed at start; later events were
			// handled live, and the next start re-indexes from pos.
			if err := emb.SaveSnapshot(snap, pos); err != nil {
				log.Warn("memory snapshot not saved", "err", err)
			}
		}
		return ix.Close()
	}
	return modules.WithStop(svc.Run, stop), nil
}

// rubrics loads reflection.rubrics (the shipped rubrics when it names no
// file) the first time it is asked.
func (a *App) rubrics() (*reflection.RubricStore, error) {
	if a.rubricStore == nil {
		s, err := a.Config.Reflection.OpenRubrics()
		if err != nil {
			return nil, err
		}
		a.rubricStore = s
	}
	return a.rubricStore, nil
}

// evaluator builds reflection's evaluator from reflection.*: the rubric
// file, the reward weights and the timeout and abandonment policy.
func (a *App) evaluator(ctx context.Context, log *slog.Logger) (*reflection.Evaluator, error) {
	rs, err := a.rubrics()
	if err != nil {
		return nil, err
	}
	rc := a.Config.Reflection
	ecfg := reflection.EvaluatorConfig{Reader: a.Store, Rubrics: rs, Config: &rc}
	if a.Memory != nil {
		ecfg.Types = memoryTypes{a.Memory, a.Embedder}
	}
	if v := a.lessonView(ctx); v != nil {
		ecfg.References = viewSource{v}
	}
	return reflection.NewEvaluator(ecfg, log)
}

// initReflection runs the evaluator (interaction.recorded and feedback →
// interaction.evaluated), the reward-hacking detectors (→ anomaly.detected)
// and the scoreboard, which is rebuilt from the store first.
func (a *App) initReflection(ctx context.Context) (modules.Service, error) {
	log := a.logger("reflection")
	ev, err := a.evaluator(ctx, log)
	if err != nil {
		return nil, err
	}
	log.Info("grading by rubrics", "version", a.rubricStore.Current().Version, "file", a.Config.Reflection.Rubrics)
	dc := a.Config.Reflection.Detectors
	dc.Stable = a.Config.Rollout.Stable
	det := reflection.NewDetectors(dc)
	group := a.Bus.Subscriber
	return a.worker("reflection",
		bus.EventHandler{Name: "evaluator", Topics: topicsOf(groupReflection),
			Subscriber: group("reflection"), Store: a.Store, Handle: ev.Handle},
		bus.EventHandler{Name: "detectors", Topics: topicsOf(groupDetectors),
			Subscriber: group("detectors"), Store: a.Store, Handle: det.Handle},
	)
}

// initScoreboard builds reflection's scoreboard, a projection every
// process that serves it keeps for itself: rebuilt from the store, then
// following the store (not a consumer group, which processes would
// share).
func (a *App) initScoreboard(ctx context.Context) (modules.Service, error) {
	log := a.logger("scoreboard")
	sb := reflection.NewScoreboard()
	f := events.Filter{Types: []string{events.TypeInteractionEvaluated}}
	var pos uint64
	err := events.Scan(ctx, a.Store, 0, f, func(e events.Event) error {
		if err := sb.Apply(e); err != nil {
			log.Warn("scoreboard skipped an event", "position", e.Position, "err", err)
		}
		pos = e.Position
		return nil
	})
	if err != nil {
		return nil, err
	}
	a.Scoreboard = sb
	return modules.Func(func(ctx context.Context) error {
		err := a.Store.Subscribe(ctx, pos, f, func(_ context.Context, e events.Event) error {
			if err := sb.Apply(e); err != nil {
				log.Warn("scoreboard skipped an event", "position", e.Position, "err", err)
			}
			return nil
		})
		if ctx.Err() != nil {
			return nil
		}
		return err
	}), nil
}

// memoryTypes infers an unlabelled interaction's type from its nearest
// labelled neighbours in the memory (k = 7, confidence at least 0.5).
type memoryTypes struct {
	ix  memory.Index
	emb memory.Embedder
}

func (m memoryTypes) InferType(ctx context.Context, rec *events.InteractionRecorded) (string, float64, error) {
	var v memory.InteractionView
	v.Tenant = rec.Tenant
	for _, msg := range rec.Messages {
		if msg.Role == "user" {
			v.Prompt = msg.Content
		}
	}
	if len(rec.Choices) > 0 {
		v.Answer = rec.Choices[0].Message.Content
	}
	vecs, err := m.emb.Embed(ctx, []string{v.Text()})
	if err != nil {
		return "", 0, err
	}
	g, err := memory.InferType(ctx, m.ix, memory.InteractionsCollection, rec.Tenant, vecs[0], 7, 0.5)
	if err != nil || g.Type == memory.Unknown {
		return "", g.Confidence, err
	}
	return g.Type, g.Confidence, nil
}

// opsCaller is the operator surface's view of the gateway's caller:
// operator keys see every tenant, any other key only its own, and a
// revoked key's open streams end.
func opsCaller(c echo.Context) ops.Caller {
	k := gateway.KeyOf(c)
	return ops.Caller{Key: k.ID, Tenant: k.Tenant, Operator: k.IsOperator(), Valid: func() bool { return gateway.KeyValid(c) }}
}

// storeReady reports whether the event store can record, for /readyz:
// a store that knows (the embedded log after a failed write) says so.
func (a *App) storeReady() error {
	if r, ok := a.Store.(interface{ Ready() error }); ok {
		return r.Ready()
	}
	return nil
}

// rehearsal loads distill.rehearsal: by default the embedded checkpoint's
// rehearsal.jsonl (none when it has none), "off" for none.
func (a *App) rehearsal() ([]distill.RehearsalCase, error) {
	path := a.Config.Distill.Rehearsal
	switch path {
	case "off":
		return nil, nil
	case "":
		dir, err := a.checkpoint(context.Background())
		if err != nil {
			return nil, err
		}
		path = filepath.Join(dir, distill.RehearsalFile)
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) || strings.HasSuffix(dir, ".gguf") {
			return nil, nil
		}
	}
	cases, err := distill.LoadRehearsal(path)
	if err != nil {
		return nil, fmt.Errorf("distill.rehearsal: %w", err)
	}
	a.logger("distiller").Info("rehearsing the base's training data", "file", path, "conversations", len(cases))
	return cases, nil
}

// initDistiller runs training cycles over the graded interactions; it
// needs the embedded model (the base it trains adapters for and the
// teacher for self-distillation).
func (a *App) initDistiller(ctx context.Context) (modules.Service, error) {
	if a.Embedded == nil {
		// Nothing to train in this process: the engine is an upstream
		// server (its adapters come from its own trainer) or the stub.
		a.logger("distiller").Warn("distiller idle: it trains the embedded model, and model.engine is " + a.Config.Model.Engine)
		return nil, nil
	}
	dc := a.Config.Distill
	cfg := distill.Config{
		DataDir: filepath.Join(a.Config.DataDir, "distill"), Base: a.Embedded.Chat().Engine.Model(), BaseName: a.baseModel(), Chat: a.Embedded.Chat(),
		Hyper: distill.Hyper{LR: dc.LR, MaxSteps: dc.MaxSteps, Epochs: dc.Epochs, TrainTokens: dc.TrainTokens}, HoldOutTokens: dc.HoldOutTokens, MinNewGraded: dc.MinNewGraded, Interval: dc.Interval,
		TrainTimeout: dc.TrainTimeout, StallTimeout: dc.StallTimeout,
		Exemplars: distill.MemoryExemplars(a.Memory, a.Embedder, 2, 0.5),
	}
	if dc.Rank > 0 {
		cfg.LoRA = distill.DefaultLoRA()
		cfg.LoRA.Rank, cfg.LoRA.Alpha = dc.Rank, float64(2*dc.Rank)
	}
	if dc.Command != "" {
		cfg.Trainer = &distill.CommandTrainer{Command: strings.Fields(dc.Command)}
	}
	if a.WrapTrainer != nil {
		if cfg.Trainer == nil {
			cfg.Trainer = distill.EmbeddedTrainer{}
		}
		cfg.Trainer = a.WrapTrainer(cfg.Trainer)
	}
	// reflection.rubrics, which the evaluations grade by: their
	// check-mode graders vet what the distiller writes itself, and their
	// reference graders judge the regression suite.
	rubrics, err := a.rubrics()
	if err != nil {
		return nil, err
	}
	if !dc.UnvettedAnswers {
		cfg.Revise = func(ex distill.Example, answer string) (bool, bool) {
			pass, checked, _ := rubrics.Current().Check(ex.Type, ex.Question(), answer)
			return pass, checked
		}
	}
	if dc.Suite != "" {
		suite, err := distill.LoadSuite(dc.Suite)
		if err != nil {
			return nil, fmt.Errorf("distill.suite: %w", err)
		}
		cfg.Suite = suite
		cfg.SuiteGrade = func(c distill.SuiteCase, answer string) (bool, bool) {
			return rubrics.Current().Judge(c.Type, answer, c.Expected)
		}
		cfg.Gate.MaxSuiteLoss = dc.MaxSuiteLoss
		cfg.SuiteStableMargin, cfg.SuiteStableSample = dc.SuiteStableMargin, dc.SuiteStableSample
		cfg.SuiteTokens = dc.SuiteTokens
		if v := a.lessonView(ctx); v != nil {
			cfg.SuiteAside = suiteAside(v)
		}
	}
	if v := a.lessonView(ctx); v != nil {
		cfg.LessonOf = func(id string) (string, string, []string, bool) {
			l, ok := v.Get(id)
			return l.Statement, l.Value, l.Scope.Anchors, ok && l.Kind == events.LessonFact
		}
		cfg.Lesson = distillLesson(v)
	}
	cfg.AbandonForLessons = dc.AbandonForLessons
	rehearsal, err := a.rehearsal()
	if err != nil {
		return nil, err
	}
	cfg.Rehearsal = rehearsal
	d, err := distill.New(cfg, a.Store, a.logger("distiller"))
	if err != nil {
		return nil, err
	}
	a.Distiller = d
	if err := registerDistillerMetrics(a.metrics(), d); err != nil {
		return nil, err
	}
	return a.elected(leaseDistiller, modules.Func(func(ctx context.Context) error {
		err := d.Run(ctx)
		if ctx.Err() != nil {
			return nil
		}
		return err
	}))
}

// initRollout runs the rollout controller: canaries for accepted versions,
// promoted or rolled back on evidence.
func (a *App) initRollout(ctx context.Context) (modules.Service, error) {
	c, err := rollout.New(a.Config.Rollout, a.Store, a.logger("rollout"))
	if err != nil {
		return nil, err
	}
	a.Rollout = c
	if err := c.Register(a.metrics()); err != nil {
		return nil, err
	}
	return a.elected(leaseRollout, modules.Func(func(ctx context.Context) error {
		err := c.Run(ctx)
		if ctx.Err() != nil {
			return nil
		}
		return err
	}))
}
