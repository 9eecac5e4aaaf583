package feedback

import "strings"

// The word lists of the embedded interpreter. Valences are in [-1, 1];
// intensifier and diminisher values multiply the next polar word.

var wordValence = map[string]float64{
	// positive
	"perfect": 1, "perfectly": 0.7, "excellent": 1, "great": 0.9, "awesome": 1, "amazing": 1, "fantastic": 1,
	"brilliant": 1, "superb": 1, "outstanding": 1, "love": 0.9, "loved": 0.9, "best": 0.9, "lifesaver": 1,
	"wonderful": 1, "impressive": 0.9, "impressed": 0.9, "nailed": 1, "flawless": 1, "exceptional": 1,
	"incredible": 0.9, "a+": 1, "good": 0.7, "gud": 0.7, "gr8": 0.9, "helpful": 0.8, "useful": 0.8, "correct": 0.8,
	"accurate": 0.8, "right": 0.6, "thanks": 0.6, "thank": 0.6, "thx": 0.6, "thnx": 0.6, "ty": 0.6, "cheers": 0.5,
	"works": 0.7, "worked": 0.7, "working": 0.5, "work": 0.4, "solved": 0.8, "solves": 0.7, "fixed": 0.7, "nice": 0.7,
	"nicely": 0.5, "clear": 0.6, "concise": 0.7, "happy": 0.8, "glad": 0.7, "appreciate": 0.7, "appreciated": 0.7,
	"recommend": 0.7, "solid": 0.7, "handy": 0.7, "clever": 0.7, "polite": 0.6, "friendly": 0.6,
	"professional": 0.5, "warm": 0.4, "valid": 0.6, "fast": 0.6, "quick": 0.6, "instantly": 0.6, "better": 0.5,
	"improvement": 0.6, "improved": 0.6, "saved": 0.7, "satisfied": 0.8, "convinced": 0.6, "cool": 0.6,
	"yes": 0.5, "yay": 0.8, "thorough": 0.7, "easy": 0.5, "compiles": 0.5, "matches": 0.5, "matched": 0.5,
	"pass": 0.3, "relevant": 0.5, "precise": 0.7, "succinct": 0.7, "brief": 0.4, "readable": 0.5, "smooth": 0.5,
	"superb!": 1, "lovely": 0.8, "excellently": 1, "neat": 0.6, "elegant": 0.7, "complete": 0.5,
	"exactly": 0.4, "enjoyed": 0.8, "like": 0.6, "liked": 0.6, "👍": 0.9, "🙂": 0.6, "😊": 0.7, "❤️": 0.8, "🎉": 0.8,
	"10/10": 1, "5/5": 1, "lightning": 0.3, "sweet": 0.5, "wow": 0.5, "beautiful": 0.8,
	"compile": 0.5, "help": 0.4, "helps": 0.6, "helped": 0.7, "solve": 0.6, "decent": 0.5, "joy": 0.7, "clean": 0.5,
	"reliable": 0.7, "clarified": 0.6, "sorted": 0.5, "pointless": -0.9, "dead": -0.6, "repeating": -0.5,
	"repeated": -0.4, "repeats": -0.5, "whatever": -0.5, "yikes": -0.7, "robot": -0.5, "stiff": -0.5,
	// negative
	"wrong": -1, "wrnog": -1, "incorrect": -1, "useless": -1, "terrible": -1, "awful": -1, "horrible": -1,
	"worst": -1, "garbage": -1, "rubbish": -1, "nonsense": -1, "false": -0.9, "hallucinated": -1,
	"hallucinating": -1, "hallucination": -1, "hallucinates": -1, "broken": -0.9, "broke": -0.9, "break": -0.6, "breaks": -0.8, "breaking": -0.8, "crashed": -0.9,
	"crash": -0.8, "crashes": -0.8, "fails": -0.8, "failed": -0.8, "fail": -0.7, "failure": -0.7,
	"disappointing": -0.9, "disappointed": -0.9, "waste": -1, "wasted": -1, "wasting": -1, "frustrated": -0.9,
	"frustrating": -0.9, "unacceptable": -1, "wtf": -0.9, "invented": -0.9, "invent": -0.8, "misleading": -0.9,
	"inaccurate": -0.9, "pathetic": -1, "annoying": -0.8, "hate": -0.9, "bad": -0.8, "poor": -0.8,
	"confusing": -0.7, "confused": -0.6, "unhelpful": -0.9, "missing": -0.6, "missed": -0.6, "misses": -0.6,
	"incomplete": -0.8, "lacks": -0.7, "lacking": -0.7, "error": -0.6, "errors": -0.6, "mistake": -0.7,
	"mistakes": -0.6, "ignored": -0.8, "ignores": -0.8, "ignoring": -0.8, "contradicts": -0.8, "outdated": -0.8,
	"deprecated": -0.6, "rude": -0.9, "condescending": -0.9, "robotic": -0.6, "slow": -0.7, "verbose": -0.7,
	"wordy": -0.7, "rambling": -0.7, "fluff": -0.6, "vague": -0.6, "meh": -0.5, "ugh": -0.7, "nope": -0.7,
	"nah": -0.6, "worse": -0.8, "malformed": -0.8, "invalid": -0.7, "misaligned": -0.6, "refused": -0.7,
	"refuses": -0.7, "deleted": -0.6, "buried": -0.5, "forgot": -0.6, "forgotten": -0.6, "issue": -0.4,
	"issues": -0.4, "complaint": -0.4, "complaints": -0.4, "bug": -0.5, "bugs": -0.5, "buggy": -0.7,
	"sucks": -0.9, "weak": -0.6, "lazy": -0.7, "irrelevant": -0.7, "repetitive": -0.5, "generic": -0.4,
	"unclear": -0.6, "messy": -0.6, "clunky": -0.5, "overkill": -0.5, "forever": -0.6, "ages": -0.5,
	"timeout": -0.6, "unfortunately": -0.5, "problematic": -0.6, "long": -0.4, "lengthy": -0.5,
	"shorter": -0.3, "stops": -0.5, "halfway": -0.4, "apology": -0.4, "guessing": -0.5, "disaster": -1,
	"👎": -0.9, "🙁": -0.6, "😡": -0.9, "😠": -0.9, "1/10": -1, "0/10": -1, "1/5": -1, "mediocre": -0.5,
	"so-so": -0.4, "dissatisfied": -0.9, "unhappy": -0.8, "sloppy": -0.7, "off": -0.7,
}

// typos maps common misspellings and chat shorthand to their words.
var typos = map[string]string{
	"nto": "not", "dont": "don't", "doesnt": "doesn't", "dosnt": "doesn't", "didnt": "didn't", "isnt": "isn't",
	"wasnt": "wasn't", "cant": "can't", "wont": "won't", "couldnt": "couldn't", "wouldnt": "wouldn't",
	"arent": "aren't", "werent": "weren't", "shouldnt": "shouldn't", "rly": "really", "v": "very",
	"u": "you", "r": "are", "answr": "answer", "shud": "should", "shld": "should", "pls": "please", "plz": "please",
	"ur": "your", "im": "i'm", "kinda": "kinda", "sorta": "kinda", "gonna": "going", "thanx": "thanks",
	"tks": "thanks", "tysm": "thanks", "awsum": "awesome",
}

// fuzzyTargets are the lexicon words that a one-edit misspelling is mapped
// to (long words only; five- and six-letter words only by transposition or
// deletion, see oneEdit).
var fuzzyTargets = []string{
	"awesome", "terrible", "incorrect", "helpful", "perfect", "correct", "excellent", "accurate", "useless",
	"useful", "thanks", "wrong", "great", "horrible", "amazing", "fantastic", "brilliant", "inaccurate",
	"misleading", "confusing", "incomplete", "unhelpful", "garbage", "awful", "disappointing", "wonderful",
	"doesn't", "didn't", "answer",
}

// negators flip the polarity of the next polar word within a short window.
// The value is the factor applied to a positive word (a negated negative
// word becomes weakly positive, see negatedNegative).
var negators = map[string]float64{
	"not": -0.8, "never": -0.8, "don't": -0.8, "doesn't": -0.8, "didn't": -0.8, "isn't": -0.8,
	"wasn't": -0.8, "weren't": -0.8, "aren't": -0.8, "won't": -0.8, "wouldn't": -0.8, "couldn't": -0.8,
	"can't": -0.8, "cannot": -0.8, "shouldn't": -0.8, "hasn't": -0.8, "haven't": -0.8, "hadn't": -0.8,
	"nothing": -0.8, "hardly": -0.7, "barely": -0.7, "without": -0.6, "none": -0.8, "nobody": -0.8,
	"neither": 0, "nor": 0, "ain't": -0.8, "no": -0.8,
}

// negatedNegative is the factor (times |valence|) given to a negated
// negative word: "not bad" is mildly positive.
const negatedNegative = 0.5

var intensifiers = map[string]float64{
	"very": 1.4, "really": 1.3, "extremely": 1.6, "so": 1.3, "totally": 1.4, "completely": 1.4,
	"absolutely": 1.5, "super": 1.4, "highly": 1.4, "incredibly": 1.5, "utterly": 1.5, "truly": 1.3,
	"way": 1.3, "exactly": 1.2, "quite": 1.1, "seriously": 1.3, "entirely": 1.4, "pretty": 1.0, "most": 1.2,
	"simply": 1.1, "perfectly": 1.3, "unbelievably": 1.5,
}

var diminishers = map[string]float64{
	"slightly": 0.5, "somewhat": 0.6, "bit": 0.6, "little": 0.6, "kinda": 0.6, "kind": 0.6, "sort": 0.6,
	"mostly": 0.8, "fairly": 0.8, "rather": 0.8, "partly": 0.6, "partially": 0.6, "reasonably": 0.8,
	"moderately": 0.7, "enough": 0.8,
}

// contrast markers: the clause after the marker dominates what came before.
var contrastMarkers = map[string]bool{"but": true, "though": true, "however": true, "although": true, "otherwise": true, "except": true, "whereas": true}

// phrase is a multi-word lexicon entry.
type phrase struct {
	words []string
	v     float64
	// negatable: whether a preceding negator flips it.
	negatable bool
}

var phraseList = []phrase{
	{words: s("spot on"), v: 1}, {words: s("on the money"), v: 0.9}, {words: s("hit the nail"), v: 0.9},
	{words: s("nailed it"), v: 1}, {words: s("thumbs up"), v: 0.9}, {words: s("well done"), v: 1},
	{words: s("to the point"), v: 0.6}, {words: s("short and sweet"), v: 0.8}, {words: s("like a charm"), v: 1},
	{words: s("no problem"), v: 0.4}, {words: s("can't complain"), v: 0.6}, {words: s("cannot complain"), v: 0.6},
	{words: s("couldn't be happier"), v: 1}, {words: s("could not be happier"), v: 1},
	{words: s("never seen a better"), v: 1}, {words: s("never seen better"), v: 1},
	{words: s("could not have asked for a better"), v: 1}, {words: s("couldn't have asked for a better"), v: 1},
	{words: s("couldn't ask for"), v: 0.8}, {words: s("up to date"), v: 0.6, negatable: true}, {words: s("up-to-date"), v: 0.6, negatable: true},
	{words: s("keep it up"), v: 0.8}, {words: s("first try"), v: 0.4},
	{words: s("did what i asked"), v: 0.7, negatable: true}, {words: s("does what i asked"), v: 0.7, negatable: true},
	{words: s("do what i asked"), v: 0.7, negatable: true}, {words: s("what i needed"), v: 0.7, negatable: true},
	{words: s("what i wanted"), v: 0.7, negatable: true}, {words: s("what i asked for"), v: 0.7, negatable: true},
	{words: s("what i was looking for"), v: 0.7, negatable: true}, {words: s("would ask again"), v: 0.6},
	{words: s("use this again"), v: 0.6}, {words: s("makes sense"), v: 0.6, negatable: true},
	{words: s("finally get it"), v: 0.6}, {words: s("saved me"), v: 0.8}, {words: s("thank you"), v: 0.7},
	{words: s("good enough"), v: 0.5}, {words: s("good job"), v: 0.9}, {words: s("high quality"), v: 0.8},
	{words: s("not what"), v: -0.8}, {words: s("wasn't what"), v: -0.8}, {words: s("isn't what"), v: -0.8},
	{words: s("not really what"), v: -0.8}, {words: s("thumbs down"), v: -0.9},
	{words: s("could be better"), v: -0.6}, {words: s("could have been better"), v: -0.6},
	{words: s("needs work"), v: -0.7}, {words: s("need work"), v: -0.7}, {words: s("try again"), v: -0.5},
	{words: s("not it"), v: -0.7}, {words: s("way off"), v: -0.9}, {words: s("by a mile"), v: -0.8},
	{words: s("waste of time"), v: -1}, {words: s("made up"), v: -1}, {words: s("making up"), v: -0.8},
	{words: s("make up"), v: -0.6, negatable: true}, {words: s("doesn't answer"), v: -0.8},
	{words: s("does not answer"), v: -0.8}, {words: s("didn't answer"), v: -0.8},
	{words: s("different question"), v: -0.7}, {words: s("i asked for"), v: -0.4}, {words: s("what i got"), v: -0.4},
	{words: s("had to"), v: -0.4}, {words: s("expected more"), v: -0.7}, {words: s("missing the point"), v: -0.8},
	{words: s("missed the point"), v: -0.8}, {words: s("left out"), v: -0.7}, {words: s("timed out"), v: -0.8},
	{words: s("time out"), v: -0.6}, {words: s("took ages"), v: -0.8}, {words: s("took forever"), v: -0.8},
	{words: s("don't add up"), v: -0.9}, {words: s("doesn't add up"), v: -0.9}, {words: s("do not add up"), v: -0.9},
	{words: s("does not add up"), v: -0.9}, {words: s("falls short"), v: -0.7}, {words: s("no idea"), v: -0.5},
	{words: s("why would you"), v: -0.6}, {words: s("why didn't"), v: -0.6}, {words: s("why did you"), v: -0.5},
	{words: s("why does it"), v: -0.5}, {words: s("why is it"), v: -0.4}, {words: s("for no reason"), v: -0.6},
	{words: s("nobody wants"), v: -0.6}, {words: s("nobody reads"), v: -0.5}, {words: s("happens a lot"), v: -0.4},
	{words: s("third time"), v: -0.4}, {words: s("went wrong"), v: -0.8}, {words: s("doesn't exist"), v: -0.7},
	{words: s("don't exist"), v: -0.7}, {words: s("does not exist"), v: -0.7}, {words: s("not quite"), v: -0.6},
	{words: s("instead of"), v: -0.4}, {words: s("out of date"), v: -0.8}, {words: s("you're right"), v: 0.8},
	{words: s("my mistake"), v: 0}, {words: s("my bad"), v: 0}, {words: s("off the rails"), v: -0.9},
	{words: s("nobody asked"), v: -0.7}, {words: s("not even close"), v: -0.9}, {words: s("lot of text"), v: -0.5},
	{words: s("i'd like"), v: 0}, {words: s("would like"), v: 0}, {words: s("too long"), v: -0.8, negatable: true},
	{words: s("too short"), v: -0.7, negatable: true}, {words: s("too slow"), v: -0.8, negatable: true},
	{words: s("too formal"), v: -0.7, negatable: true}, {words: s("too casual"), v: -0.7, negatable: true},
	{words: s("too verbose"), v: -0.8, negatable: true}, {words: s("too wordy"), v: -0.8, negatable: true},
	{words: s("too much"), v: -0.7, negatable: true}, {words: s("too many"), v: -0.7, negatable: true},
	{words: s("too technical"), v: -0.6, negatable: true}, {words: s("too vague"), v: -0.8, negatable: true},
	{words: s("too generic"), v: -0.7, negatable: true}, {words: s("too complicated"), v: -0.7, negatable: true},
	{words: s("mixed feelings"), v: 0}, {words: s("not bad"), v: 0.6}, {words: s("not too bad"), v: 0.5},
	{words: s("nice try"), v: -0.4}, {words: s("so so"), v: -0.4}, {words: s("to a client"), v: 0},
	{words: s("no worries"), v: 0.4}, {words: s("the right"), v: 0}, {words: s("the correct"), v: 0},
	{words: s("the exact"), v: 0}, {words: s("right answer"), v: 0}, {words: s("correct answer"), v: 0},
	{words: s("right number"), v: 0}, {words: s("correct value"), v: 0}, {words: s("correct spelling"), v: 0},
	{words: s("work on"), v: 0}, {words: s("a lot"), v: 0}, {words: s("looks like"), v: 0}, {words: s("seems like"), v: 0},
	{words: s("sounds like"), v: 0}, {words: s("feel like"), v: 0}, {words: s("feels like"), v: 0},
	{words: s("more detail"), v: -0.4}, {words: s("more details"), v: -0.4}, {words: s("not helpful"), v: -0.9},
	{words: s("i needed more"), v: -0.5}, {words: s("breaking change"), v: 0}, {words: s("breaking changes"), v: 0},
	{words: s("breaking news"), v: 0}, {words: s("be more"), v: -0.4},
}

func s(p string) []string { return strings.Fields(p) }

// phrasesByFirst indexes phraseList by first word, longest first.
var phrasesByFirst = func() map[string][]phrase {
	m := map[string][]phrase{}
	for _, p := range phraseList {
		m[p.words[0]] = append(m[p.words[0]], p)
	}
	for k, ps := range m {
		for i := 1; i < len(ps); i++ {
			for j := i; j > 0 && len(ps[j].words) > len(ps[j-1].words); j-- {
				ps[j], ps[j-1] = ps[j-1], ps[j]
			}
		}
		m[k] = ps
	}
	return m
}()

// sarcasm cues.
var (
	// strong cues make every positive word in the text count as negative.
	strongSarcasm = [][]string{s("thanks for nothing"), s("yeah right"), s("oh joy"), s("gee"),
		s("thank you for nothing"), s("just great"), s("so helpful not")}
	// interjections that, said of a bad outcome, are sarcastic.
	sarcasticInterjections = map[string]bool{"great": true, "wonderful": true, "perfect": true, "brilliant": true,
		"fantastic": true, "amazing": true, "lovely": true, "awesome": true, "nice": true, "super": true,
		"thanks": true, "excellent": true, "marvelous": true, "splendid": true, "cool": true, "terrific": true}
	// "amazing how ...", "love how ..." introduce a complaint.
	howCue = map[string]bool{"amazing": true, "love": true, "funny": true, "interesting": true, "impressive": true, "incredible": true}
	// weak evidence of a bad outcome for "oh <interjection>, ..."
	repeatCue = map[string]bool{"another": true, "again": true, "more": true, "still": true}
)

// answerNouns after "right"/"correct" make the word part of a correction
// ("the right answer is ..."), not praise.
var answerNouns = map[string]bool{"answer": true, "value": true, "number": true, "figure": true, "amount": true,
	"total": true, "result": true, "spelling": true, "one": true, "date": true, "year": true, "price": true, "name": true}

// englishWords are frequent function words used to tell English from other
// languages.
var englishWords = map[string]bool{
	"the": true, "a": true, "an": true, "is": true, "it": true, "it's": true, "this": true, "that": true, "to": true,
	"of": true, "and": true, "or": true, "i": true, "you": true, "not": true, "no": true, "was": true, "are": true,
	"be": true, "for": true, "in": true, "on": true, "with": true, "my": true, "me": true, "we": true, "our": true,
	"your": true, "what": true, "why": true, "how": true, "please": true, "can": true, "will": true, "do": true,
	"did": true, "have": true, "has": true, "should": true, "would": true, "could": true, "at": true, "but": true,
	"so": true, "too": true, "very": true, "again": true, "answer": true, "yes": true, "ok": true, "okay": true,
	"see": true, "if": true, "just": true, "all": true, "more": true, "less": true, "one": true, "now": true,
	"been": true, "yours": true, "were": true, "am": true, "he": true, "she": true, "they": true, "them": true,
	"there": true, "here": true, "when": true, "then": true, "than": true, "as": true, "by": true, "from": true,
	"about": true, "out": true, "up": true, "get": true, "got": true, "make": true, "made": true, "said": true,
	"only": true, "also": true, "some": true, "any": true, "every": true, "which": true, "who": true, "its": true,
}

// imperative cues: a request to change something is mild dissatisfaction.
var imperativeStarts = map[string]bool{"please": true, "stop": true, "don't": true, "use": true, "avoid": true,
	"keep": true, "be": true, "make": true, "lead": true, "cut": true, "skip": true, "drop": true, "remove": true, "shorten": true}
var imperativeAnywhere = [][]string{s("i'd like"), s("i would like"), s("i want"), s("we need"), s("should be"), s("next time"), s("could you"), s("you could"), s("you should"), s("make sure"),
	s("should have"), s("please"), s("needs to"), s("need to")}

// negOnly words carry no polarity on their own but a negated one is a
// complaint: "can't use this", "doesn't parse", "doesn't match".
var negOnly = map[string]bool{"use": true, "parse": true, "parses": true, "match": true, "load": true, "loads": true,
	"run": true, "runs": true, "render": true, "renders": true, "open": true, "understand": true, "trust": true,
	"follow": true, "apply": true, "need": true, "want": true, "handle": true, "read": true, "find": true, "fit": true}
