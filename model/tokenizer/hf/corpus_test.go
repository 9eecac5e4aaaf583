package hf

import (
	"math/rand/v2"
	"strings"
	"unicode/utf8"
)

// The parity corpus: deterministic, valid UTF-8, aimed at the places where
// a tokenizer port goes wrong.

var (
	corpusWords = strings.Fields(`the of and to in is you that it he was for on are as with his they at be this
		have from or one had by word but not what all were we when your can said there use an each which
		tokenizer token encode decode merge vocabulary function return struct package import error string`)
	corpusScripts = []string{
		"Привет мир как дела", "Γειά σου κόσμε", "こんにちは世界", "你好世界，今天天气很好", "مرحبا بالعالم",
		"שלום עולם", "नमस्ते दुनिया", "안녕하세요 세계", "Xin chào thế giới", "café naïve Zürich señor",
		"สวัสดีชาวโลก", "Բարեւ աշխարհ", "გამარჯობა მსოფლიო", "ሰላም ልዑል", "வணக்கம் உலகம்", "ওহে বিশ্ব",
		"Ελληνικά ΑΒΓΔ", "Ünïcödé ÀÉÎÕÜ", "İstanbul ıi", "straße STRASSE", "ﬁne ﬂow ﬀ", "Ⅻ Ⅳ ⅷ",
	}
	corpusEmoji = []string{
		"👋", "👋🏽", "👨‍👩‍👧‍👦", "👩🏿‍💻", "🏳️‍🌈", "🇫🇷🇯🇵", "❤️", "1️⃣", "🧑‍🤝‍🧑", "🫶🏻", "😀😃😄",
		"👍🏼👍🏾", "🤷‍♀️", "☕", "🐈‍⬛", "🏴󠁧󠁢󠁳󠁣󠁴󠁿",
	}
	corpusCode = []string{
		"func main() {\n\tfmt.Println(\"hi\")\n}\n", "def f(x):\n    return x * 2\n",
		"if (a && b) { return c; }", "for i in range(10):\n    print(i)", "x := []int{1, 2, 3}",
		"SELECT * FROM users WHERE id = 42;", "<div class=\"a\">b</div>", "{\"key\": [1, 2.5, null]}",
		"#include <stdio.h>\nint main(void) { return 0; }", "a->b->c; x >>= 2; y ||= z;",
		"    \t\tindented\n\t    mixed", "// comment\r\n/* block */", "λx.λy.x", "$HOME/.config && echo $?",
		"fn main() -> Result<(), Box<dyn Error>> {}", "<?php echo $a['b']; ?>", "```go\nx++\n```",
	}
	corpusNumbers = []string{
		"3.14159", "1,000,000", "-0.5e-10", "١٢٣٤", "²³¹", "½ ¾ ⅓", "１２３４５", "0x1F", "1_000_000",
		"12345678901234567890", "v1.2.3", "2023-12-02T04:19:00Z", "50%", "$250,000.00", "10x", "1st 2nd 3rd",
		"৩৪৫", "๑๒๓", "〇一二三", "𝟙𝟚𝟛", "\U0001CCF0\U0001CCF1", "\U00016D70\U00016D71", "\U00011DE0\U00011DE1",
		"\U00011BF0", "\U0001E4F0\U0001E4F1",
	}
	corpusSpaces = []string{
		" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r", " \n ", " \t ", "\u00a0", "\u3000",
		"\u2003", "\u2009", "\v", "\f", "\u0085", "\u2028", "\u2029", "\u200b", "\ufeff", "\u1680", "\u202f",
	}
	corpusContractions = []string{
		"I'm", "DON'T", "y'all", "it's", "IT'S", "we've", "WE'VE", "they're", "THEY'RE", "he'll", "HE'LL",
		"she'd", "SHE'D", "'s", "'S", "'ſ", "it'Ll", "we'Ve", "o'clock", "rock'n'roll", "'''", "it''s",
		"can’t", "won’t", "'ſun", "'Sun", "'LLama", "'REsult", "x'Ve'", "'dx", "'t alone", "'m", "'M", "'d", "'D", "'ll", "'LL", "'re", "'Re", "'ve",
	}
	corpusSpecials = []string{
		"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<repo_name>", "<filename>", "<empty_output>",
		"<s>", "</s>", "<pad>", "<unk>", "<mask>", "[END]", "cat", "cats", "bobcat", " <tab>", "hello world",
		"<tool_call>", "</tool_call>", "café!", "cafe\u0301!", "<|begin_of_text|>", "<|eot_id|>",
		"<|reserved_special_token_5|>", "<|start_header_id|>", "<|bos|>", "<|eos|>", "<|end|>", "<|user|>",
		"<|assistant|>", "<|system|>", "<|tool|>", "<|tool_call|>", "<|pad|>", "<|im_start", "im_end|>",
		"<||>", "<|", "|>", "<<|im_start|>>", "<|im_start|><|im_end|>",
	}
	corpusOdd = []string{
		"\ufffd", "\u0301", "a\u0301\u0302", "\u0000", "\u0001\u0002\u0003", "\u0004", "\u001f", "\u007f",
		"\ue000", "\U000F0000", "\ufffe", "\uffff", "\U0010FFFF", "\u0378", "\u200d", "\u200c", "\u2060",
		"\u202e", "\u00ad", "e\u0301", "\u1100\u1161\u11a8", "A\u030a", "\u212b", "\u1e9b\u0323",
		"\u0344", "\U0001D15E", "\u0958", "\u2126", "\u00c5", "\U0002EBF0", "\u1C89", "\U00010D50",
		"\u0CF3", "\U00011F50", "\u0560", "\U00031350", "\U0001E4D0", "ǅ", "ᾼ", "\u0e33", "ǈ",
	}
)

// randomRune returns a code point from a mix of blocks, including recently
// assigned and unassigned ones; never a surrogate.
func randomRune(r *rand.Rand) rune {
	blocks := [][2]rune{
		{0x20, 0x7e}, {0xa0, 0x24f}, {0x300, 0x36f}, {0x370, 0x3ff}, {0x400, 0x4ff}, {0x530, 0x58f},
		{0x590, 0x6ff}, {0x900, 0xdff}, {0xe00, 0xeff}, {0x10a0, 0x10ff}, {0x1100, 0x11ff}, {0x1200, 0x137f},
		{0x1c80, 0x1cff}, {0x1e00, 0x1fff}, {0x2000, 0x206f}, {0x2070, 0x218f}, {0x2190, 0x2bff},
		{0x3000, 0x30ff}, {0x4e00, 0x4fff}, {0xac00, 0xad00}, {0xe000, 0xe0ff}, {0xfb00, 0xfdff},
		{0xfe00, 0xfe6f}, {0xff00, 0xffff}, {0x10000, 0x1034f}, {0x10d00, 0x10d8f}, {0x11000, 0x11fff},
		{0x16d40, 0x16d7f}, {0x1cc00, 0x1cfff}, {0x1d400, 0x1d7ff}, {0x1e000, 0x1e8ff}, {0x1f000, 0x1faff},
		{0x20000, 0x2000f}, {0x2ebf0, 0x2ee5f}, {0x31350, 0x323af}, {0xe0000, 0xe007f}, {0xf0000, 0xf000f},
	}
	b := blocks[r.IntN(len(blocks))]
	return b[0] + rune(r.IntN(int(b[1]-b[0]+1)))
}

func pick(r *rand.Rand, xs []string) string { return xs[r.IntN(len(xs))] }

func randomWord(r *rand.Rand) string {
	w := pick(r, corpusWords)
	switch r.IntN(5) {
	case 0:
		w = strings.ToUpper(w[:1]) + w[1:]
	case 1:
		w = strings.ToUpper(w)
	}
	return w
}

func fragment(r *rand.Rand) string {
	switch r.IntN(12) {
	case 0, 1:
		n := 1 + r.IntN(8)
		ws := make([]string, n)
		for i := range ws {
			ws[i] = randomWord(r)
		}
		return strings.Join(ws, " ")
	case 2:
		return pick(r, corpusScripts)
	case 3:
		return pick(r, corpusEmoji)
	case 4:
		return pick(r, corpusCode)
	case 5:
		return pick(r, corpusNumbers)
	case 6:
		return strings.Repeat(pick(r, corpusSpaces), 1+r.IntN(4))
	case 7:
		return pick(r, corpusContractions)
	case 8:
		return pick(r, corpusSpecials)
	case 9:
		return pick(r, corpusOdd)
	case 10:
		var b strings.Builder
		for n := 1 + r.IntN(12); n > 0; n-- {
			b.WriteRune(randomRune(r))
		}
		return b.String()
	}
	return string(rune('!' + r.IntN(15)))
}

// longWord returns a long run of one or several classes and widths.
func longWord(r *rand.Rand) string {
	units := []string{"a", "Z", "é", "ж", "中", "𝒜", "7", "٣", "-", "=", "…", "😀", " ", "\t", "\u3000", "\n",
		"ab", "é", "\u200d", "ſ"}
	var b strings.Builder
	n := 20 + r.IntN(300)
	if r.IntN(10) == 0 {
		n = 2000 + r.IntN(3000)
	}
	k := 1 + r.IntN(3)
	us := make([]string, k)
	for i := range us {
		us[i] = pick(r, units)
	}
	for i := 0; i < n; i++ {
		b.WriteString(us[r.IntN(k)])
	}
	return b.String()
}

// parityCorpus returns n deterministic test strings.
func parityCorpus(n int) []string {
	r := rand.New(rand.NewPCG(20261202, 17))
	out := []string{"", " ", "a", "  a", "a  ", "hello world", " hello", "Hello, World!", "\n\n\nx", "x\n\n\n"}
	for _, group := range [][]string{corpusScripts, corpusEmoji, corpusCode, corpusNumbers, corpusSpaces,
		corpusContractions, corpusSpecials, corpusOdd} {
		out = append(out, group...)
	}
	for _, sp := range corpusSpecials {
		out = append(out, "x"+sp+"y", " "+sp+" ", "a "+sp, sp+"\n", "\t"+sp+"  b", sp+sp)
	}
	for _, w := range corpusSpaces {
		for _, c := range []string{"a", "1", ".", "中", " ", "\n"} {
			out = append(out, "x"+w+c, w+w+c, c+w)
		}
	}
	for len(out) < n {
		var s string
		switch k := r.IntN(20); {
		case k < 2:
			s = longWord(r)
		case k < 4:
			s = fragment(r)
		default:
			var b strings.Builder
			for m := 1 + r.IntN(10); m > 0; m-- {
				b.WriteString(fragment(r))
				if r.IntN(3) == 0 {
					b.WriteString(pick(r, corpusSpaces))
				}
			}
			s = b.String()
		}
		if !utf8.ValidString(s) {
			panic("corpus: invalid UTF-8")
		}
		out = append(out, s)
	}
	return out[:n]
}
