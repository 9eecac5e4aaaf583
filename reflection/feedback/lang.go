package feedback

import (
	"sort"
	"strings"
)

// Multilingual lexicons (English, German, Spanish, French, Italian,
// Portuguese, Dutch) for the classifier's features. Words are folded
// (lower case, no diacritics). A word or phrase may carry several
// classes. The lists are general vocabulary: none names a fact, a product
// or a comment.

// lclass is a set of lexicon classes.
type lclass uint64

const (
	lPos        lclass = 1 << iota // positive evaluation ("good", "gut", "bueno")
	lPosS                          // strong positive ("perfect", "perfekt")
	lNeg                           // negative evaluation ("bad", "schlecht")
	lWrong                         // says the answer is wrong ("wrong", "falsch", "faux")
	lRight                         // says the answer is right ("correct", "stimmt", "klopt")
	lNegator                       // negation ("not", "nicht", "pas")
	lIntens                        // intensifier ("very", "sehr", "muy")
	lThanks                        // thanks ("thanks", "danke", "merci")
	lGreet                         // greeting or filler ("hi", "hallo", "test")
	lAck                           // acknowledgement ("ok", "noted", "verstanden")
	lHedge                         // hedging ("i think", "glaube", "creo")
	lDoubt                         // doubt ("are you sure", "sicher?")
	lQWord                         // question word ("why", "warum", "pourquoi")
	lContrast                      // contrast ("but", "aber", "pero")
	lRetract                       // retraction ("oh wait", "never mind", "my bad")
	lSarc                          // sarcasm cue ("sure", "yeah right", "genius")
	lPolicy                        // dislike of a policy or price ("expensive", "teuer")
	lFormat                        // format or extra rendering ("table", "tabelle", "list")
	lLength                        // length ("long", "short", "lang", "corto")
	lTone                          // tone ("formal", "rude", "frech")
	lYes                           // yes
	lNo                            // no
	lRequest                       // polite request ("please", "could you", "bitte")
	lFix                           // asks for a fix ("fix", "update", "check")
	lCorrCue                       // introduces a right value ("actually", "should be", "eigentlich")
	lStory                         // first-person narrative ("i", "ich", "yo", "je")
	lNotFault                      // exonerates the answer ("not your fault", "anyway")
	lSelf                          // the speaker ("i", "me", "my")
	lIdeal                         // praise nouns/verbs ("love", "helped", "nailed")
	lComplaintN                    // complaint nouns and verbs ("complaints", "Beschwerden", "fault")
	lRef                           // refers to the answer ("you", "this", "answer", "bot")
	lIntent                        // what the speaker will do ("I'll", "tomorrow", "werde")
	lAlso                          // "also", "too", "auch"
	lOther                         // things other than the answer ("website", "app", "weather", "my cat")
	lInfoAck                       // takes the information in ("good to know", "dann weiß ich Bescheid", "au moins c'est clair")
	lContra                        // asks about a contradiction ("then why", "how come", "warum dann")
)

var lexWords = map[string]lclass{}

// lexPhrases maps a phrase's first word to the phrases (word lists) that
// start with it, longest first.
var lexPhrases = map[string][]lexPhrase{}

type lexPhrase struct {
	words []string
	class lclass
}

func addLex(class lclass, lists ...string) {
	for _, list := range lists {
		for _, item := range strings.Split(list, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			// the lexer splits "long-winded" into "long", "-", "winded"
			ws := strings.Fields(strings.ReplaceAll(fold(item), "-", " - "))
			if len(ws) == 1 {
				lexWords[ws[0]] |= class
				continue
			}
			ps := lexPhrases[ws[0]]
			found := false
			for k := range ps {
				if strings.Join(ps[k].words, " ") == strings.Join(ws, " ") {
					ps[k].class |= class
					found = true
				}
			}
			if !found {
				ps = append(ps, lexPhrase{words: ws, class: class})
				for j := len(ps) - 1; j > 0 && len(ps[j].words) > len(ps[j-1].words); j-- {
					ps[j], ps[j-1] = ps[j-1], ps[j]
				}
			}
			lexPhrases[ws[0]] = ps
		}
	}
}

func init() {
	addLex(lPos,
		// en
		"good, great, nice, helpful, useful, clear, fine, cool, solid, handy, neat, lovely, awesome, fantastic, amazing, wonderful, brilliant, superb, excellent, quick, fast, accurate, precise, concise, thorough, easy, smooth, glad, happy, pleased, satisfied, impressed, impressive, beautiful, sweet, decent, reliable, works, worked, helped, helps, saved, love, loved, like, liked, appreciate, appreciated, enjoyed, informative, straightforward, spot on, well done, good job, nailed it, thumbs up, exactly, bang on, legit, top, gem, lifesaver, champion, grand, ace, clever, smart, friendly, polite, kind, sorted, exactly what, just what, made my day, on point, works great, very clear, crystal clear",
		// de
		"gut, super, toll, klasse, prima, hilfreich, nutzlich, klar, schnell, genau, hervorragend, ausgezeichnet, wunderbar, spitze, top, danke, freundlich, verstandlich, praktisch, schon, perfekt, passt, gelungen, stark, genial, lieb, sauber, richtig, korrekt, stimmt, einwandfrei, geholfen, hilft, bestens, topp, weiter so",
		// es
		"bien, bueno, buena, genial, util, utiles, claro, clara, rapido, rapida, perfecto, perfecta, excelente, estupendo, fantastico, maravilloso, correcto, correcta, exacto, amable, gracias, encanta, encanto, ayudo, ayuda, sirvio, sirve, mejor, chevere, buenisimo, fenomenal, precisa, preciso, impecable",
		// fr
		"bien, bon, bonne, super, genial, geniale, utile, utiles, clair, claire, rapide, parfait, parfaite, excellent, excellente, top, merci, correct, correcte, exact, exacte, pratique, sympa, formidable, impeccable, nickel, bravo, aide, aidee, efficace, precis, precise, chouette, tres bien",
		// it
		"bene, buono, buona, ottimo, ottima, utile, utili, chiaro, chiara, veloce, rapido, rapida, perfetto, perfetta, eccellente, fantastico, grazie, corretto, corretta, esatto, esatta, gentile, bravo, brava, aiutato, preciso, precisa, impeccabile, chiarissimo, giusto, giusta",
		// pt
		"bom, boa, otimo, otima, util, uteis, claro, clara, rapido, rapida, perfeito, perfeita, excelente, obrigado, obrigada, correto, correta, certo, certa, exato, exata, ajudou, ajuda, gentil, maravilhoso, show, bacana, incrivel, preciso, precisa, valeu",
		// nl
		"goed, goede, top, super, handig, nuttig, duidelijk, snel, perfect, prima, uitstekend, geweldig, fijn, fijne, mooi, correct, klopt, juist, bedankt, dank, behulpzaam, precies, helder, heerlijk, lekker, netjes, geholpen",
	)
	addLex(lPosS,
		"perfect, excellent, brilliant, superb, awesome, amazing, fantastic, flawless, outstanding, nailed, spot on, exactly, love, loved, best, lifesaver, incredible, wonderful, legend, genius, thank you so much, thanks so much, thanks a lot, many thanks, much appreciated, thanks a million, thank you very much",
		"perfekt, hervorragend, ausgezeichnet, genial, spitze, wunderbar, vielen dank, danke schon, danke sehr, super, klasse, toll, herzlichen dank",
		"perfecto, perfecta, excelente, genial, fantastico, maravilloso, muchas gracias, mil gracias, buenisimo, increible",
		"parfait, parfaite, excellent, excellente, genial, formidable, merci beaucoup, merci mille fois, impeccable, top, super",
		"perfetto, perfetta, ottimo, ottima, eccellente, fantastico, grazie mille, grazie tante, impeccabile, fantastica",
		"perfeito, perfeita, otimo, otima, excelente, muito obrigado, muito obrigada, incrivel, maravilhoso",
		"perfect, uitstekend, geweldig, super, top, heel erg bedankt, hartelijk dank, dank je wel, dankjewel, heel fijn",
	)
	addLex(lNeg,
		"bad, poor, awful, terrible, horrible, useless, pointless, garbage, rubbish, nonsense, disappointing, disappointed, annoying, frustrating, confusing, unclear, vague, sloppy, lazy, unhelpful, worse, worst, meh, ugh, nope, nah, broken, fail, failed, fails, mess, messy, waste, wasted, pathetic, ridiculous, joke, clueless, hopeless, lame, weak, embarrassing, unacceptable, misleading, inaccurate, incomplete, missing, missed, forgot, forgotten, ignored, ignores, outdated, out of date, doesn't help, didn't help, not helpful, no help, not useful, rude, condescending, smug, patronising, patronizing, robotic, cold, stiff, pushy, salesy, cheesy, passive aggressive, too long, too short, too formal, too casual, too much, wall of text, long-winded, verbose, wordy, rambling, numpties, idiots, idiot, stupid, dumb, seriously, come on, wtf, smh, lol no, bot is broken, off, way off, not even close, not what i asked, doesn't match, does not match, doesn't answer, missed the point, sucks, bs",
		"schlecht, schlimm, falsch, nutzlos, unbrauchbar, enttauschend, enttauscht, armselig, unklar, verwirrend, unsinn, quatsch, mist, blodsinn, schade, leider, fehler, fehlerhaft, unvollstandig, veraltet, frech, unhoflich, zu lang, zu kurz, zu formell, zu steif, peinlich, katastrophe, daneben, hilft nicht, stimmt nicht, keine hilfe, bringt nichts",
		"mal, malo, mala, pesimo, pesima, inutil, horrible, terrible, fatal, incorrecto, incorrecta, equivocado, equivocada, confuso, confusa, error, errores, falso, falsa, decepcionante, absurdo, desastre, demasiado largo, demasiado corto, demasiado formal, grosero, borde, no sirve, no ayuda, no es correcto, no es asi, no esta bien, esta mal",
		"mauvais, mauvaise, nul, nulle, inutile, horrible, faux, fausse, erreur, erreurs, incorrect, incorrecte, confus, confuse, decevant, decevante, absurde, n'importe quoi, trop long, trop court, trop formel, pas clair, pas correct, pas bon, pas utile, pas juste, catastrophe, bidon, rate, errone, erronee",
		"male, brutto, brutta, pessimo, pessima, inutile, sbagliato, sbagliata, errore, errato, errata, falso, falsa, confuso, confusa, deludente, assurdo, troppo lungo, troppo corto, troppo formale, freddo, scortese, non va, non aiuta, non e giusto, non e corretto, disastro",
		"mal, ruim, pessimo, pessima, inutil, horrivel, errado, errada, erro, erros, incorreto, incorreta, falso, falsa, confuso, confusa, decepcionante, absurdo, muito longo, muito curto, muito formal, nao ajuda, nao serve, nao e bem assim, nao esta certo, esta errado, desastre",
		"slecht, slechte, nutteloos, waardeloos, fout, verkeerd, onjuist, onduidelijk, verwarrend, teleurstellend, jammer, onzin, te lang, te kort, te formeel, onvolledig, klopt niet, niet goed, niet juist, helpt niet, niks aan, belachelijk",
	)
	addLex(lWrong,
		"wrong, incorrect, false, untrue, inaccurate, mistaken, mistake, error, not right, not correct, not true, isn't right, isn't correct, is wrong, that's wrong, thats wrong, its wrong, wrong answer, wrong again, way off, not even close, off by, outdated, out of date, doesn't add up, don't add up, made up, nope, no it's, no its, bzzt, nah, lies, not quite, not exactly, nonsense, rubbish, that's not, thats not, that is not, it's not, its not, it isn't, they don't, they do, you do, we do, you don't",
		"falsch, stimmt nicht, nicht richtig, nicht korrekt, fehler, unrichtig, irrtum, quatsch, unsinn, das ist nicht, ist falsch, stimmt so nicht",
		"incorrecto, incorrecta, equivocado, equivocada, falso, falsa, error, mal, no es, no son, no es correcto, esta mal, no es cierto, te equivocas, estas equivocado",
		"faux, fausse, incorrect, incorrecte, erreur, errone, erronee, pas correct, pas juste, c'est faux, vous vous trompez, tu te trompes, ce n'est pas, c'est pas, pas vrai",
		"sbagliato, sbagliata, errato, errata, errore, falso, falsa, non e, non sono, non e vero, ti sbagli, vi sbagliate, non e corretto, non e giusto",
		"errado, errada, incorreto, incorreta, erro, falso, falsa, nao e, nao sao, nao esta certo, esta errado, esta errada, voce errou",
		"fout, verkeerd, onjuist, niet juist, niet correct, klopt niet, onwaar, dat is niet, het is niet, klopt geen",
	)
	addLex(lRight,
		"right, correct, accurate, true, exactly, spot on, checks out, matches, match, same as, agrees, confirmed, confirm, that's it, thats it, yes, yep, yup, indeed, precisely, bang on, on the money, that's right, you're right, youre right, fair enough",
		"richtig, korrekt, stimmt, genau, passt, ubereinstimmend, bestatigt, das stimmt, genau so, gleich wie",
		"correcto, correcta, exacto, exacta, cierto, cierta, coincide, igual que, asi es, tienes razon, tiene razon, confirmo",
		"correct, correcte, exact, exacte, juste, vrai, c'est ca, pareil, comme, confirme, vous avez raison, tu as raison, effectivement",
		"corretto, corretta, esatto, esatta, giusto, giusta, vero, coincide, uguale, confermo, hai ragione, avete ragione, proprio cosi",
		"correto, correta, certo, certa, exato, exata, verdade, confere, igual, bate, confirmo, tem razao, voce tem razao",
		"klopt, correct, juist, precies, exact, waar, komt overeen, hetzelfde, bevestigd, je hebt gelijk, u heeft gelijk, inderdaad",
	)
	addLex(lNegator,
		"not, no, never, none, nothing, nobody, neither, nor, without, hardly, barely, isn't, wasn't, aren't, weren't, don't, doesn't, didn't, can't, cannot, couldn't, won't, wouldn't, shouldn't, hasn't, haven't, hadn't, ain't, nt, dont, doesnt, didnt, isnt, wasnt, cant, wont, nope",
		"nicht, kein, keine, keinen, keiner, keines, nie, niemals, nichts, ohne, kaum, weder",
		"no, nunca, jamas, nada, ni, sin, tampoco, ningun, ninguna, ninguno, nadie",
		"pas, ne, n'est, n'a, n'ai, n'y, jamais, rien, aucun, aucune, sans, ni, personne, non",
		"non, mai, niente, nulla, senza, nessun, nessuna, nessuno, ne, nn",
		"nao, nunca, nada, sem, nem, nenhum, nenhuma, ninguem, nao e, nao foi, nao sao",
		"niet, geen, nooit, niets, zonder, noch, niemand, nergens",
	)
	addLex(lIntens,
		"very, really, so, super, extremely, totally, completely, absolutely, highly, incredibly, truly, seriously, utterly, way, too, quite, such, most, much, insanely",
		"sehr, echt, total, wirklich, voll, absolut, vollig, extrem, viel, ganz, so, zu",
		"muy, super, realmente, totalmente, muchisimo, mucho, demasiado, tan, bastante",
		"tres, vraiment, super, totalement, completement, trop, si, tellement, beaucoup",
		"molto, davvero, super, troppo, proprio, tanto, veramente, assolutamente",
		"muito, super, realmente, totalmente, demais, bem, bastante, tao",
		"heel, erg, echt, super, zeer, totaal, helemaal, best, te, zo, hartstikke",
	)
	addLex(lThanks,
		"thanks, thank, thank you, thx, thnx, thanx, ty, tysm, ta, cheers, tks, many thanks, thanks a lot, much obliged",
		"danke, dankeschon, danke schon, vielen dank, merci, besten dank",
		"gracias, muchas gracias, mil gracias",
		"merci, merci beaucoup",
		"grazie, grazie mille, grazie tante",
		"obrigado, obrigada, valeu, brigado",
		"bedankt, dank je, dank u, dankjewel, dank je wel, dankuwel, merci",
	)
	addLex(lGreet,
		"hi, hello, hey, hiya, yo, test, testing, morning, good morning, good evening, evening, bye, goodbye, see you, greetings, sup, dear",
		"hallo, hi, moin, servus, tschuss, guten tag, guten morgen, gruss, test",
		"hola, buenas, buenos dias, buenas tardes, adios, saludos, prueba",
		"bonjour, salut, bonsoir, coucou, au revoir, test",
		"ciao, salve, buongiorno, buonasera, arrivederci, prova",
		"oi, ola, bom dia, boa tarde, boa noite, tchau, teste",
		"hallo, hoi, goedemorgen, goedemiddag, dag, doei, test",
	)
	addLex(lAck,
		"ok, okay, k, kk, okey, noted, got it, understood, alright, all right, i see, sure, fine, will do, roger, gotcha, right, ack, received, copy that, makes sense, fair, i'll check, i'll look, i'll try, i'll see, let me check, no comment, nothing to add, no feedback, nothing to say, nothing else",
		"ok, okay, alles klar, verstanden, notiert, gut zu wissen, in ordnung, aha, ich schaue, mal sehen, kein kommentar, nichts hinzuzufugen",
		"vale, ok, entendido, de acuerdo, anotado, ya veo, sin comentarios, nada que anadir, bueno",
		"d'accord, ok, compris, entendu, note, je vois, ca marche, sans commentaire, rien a ajouter, bon",
		"ok, va bene, capito, d'accordo, ricevuto, preso nota, vedo, nessun commento, niente da aggiungere",
		"ok, entendi, entendido, beleza, anotado, certo, sem comentarios, nada a acrescentar, ta bom, esta bem",
		"oke, ok, begrepen, genoteerd, prima, helder, duidelijk, geen commentaar, niets toe te voegen, ik snap het",
	)
	addLex(lHedge,
		"i think, i thought, i believe, maybe, perhaps, probably, might, could be wrong, not sure, not totally sure, not 100% sure, pretty sure, fairly sure, i'm fairly sure, if i remember, as far as i know, i could be wrong, i might be wrong, don't quote me, unless i'm, i guess, i suppose, iirc, afaik, i was taught, we were taught, i always thought",
		"ich glaube, ich denke, vielleicht, wahrscheinlich, meines wissens, bin mir nicht sicher, nicht ganz sicher, irre ich mich, glaube ich, soweit ich weiss",
		"creo, creo que, quiza, quizas, tal vez, a lo mejor, no estoy seguro, no estoy segura, me parece que, si no me equivoco, puede que",
		"je crois, je pense, peut-etre, sans doute, je ne suis pas sur, je ne suis pas sure, je peux me tromper, il me semble, si je me souviens",
		"credo, penso, forse, probabilmente, non sono sicuro, non sono sicura, forse sbaglio, mi sembra, se non sbaglio",
		"acho, acho que, talvez, provavelmente, nao tenho certeza, posso estar enganado, posso estar enganada, me parece, se nao me engano",
		"ik denk, ik dacht, misschien, waarschijnlijk, volgens mij, ik weet het niet zeker, niet zeker, vergis ik me, als ik me niet vergis",
	)
	addLex(lDoubt,
		"are you sure, you sure, sure about, really?, seriously?, double-check, double check, check again, can you check, can you verify, verify, seems off, seems high, seems low, seems wrong, seems short, seems long, feels wrong, feels off, looks off, looks wrong, looks too, doubt, doubtful, i doubt, suspicious, hmm, hm, that can't be, can't be right, cannot be right, i don't think so, i have my doubts, sounds wrong, sounds off, too high, too low, too round",
		"sicher, bist du sicher, sind sie sicher, wirklich, zweifel, kommt mir, scheint, nachprufen, uberprufen, kann das sein",
		"seguro, segura, estas seguro, esta seguro, de verdad, me parece, parece, dudo, revisa, comprueba, verifica, demasiado redondo",
		"sur, sure, vous etes sur, tu es sur, vraiment, j'ai un doute, je doute, ca me semble, verifiez, verifier, bizarre",
		"sicuro, sicura, sei sicuro, davvero, dubbio, mi sembra, sembra, controlla, verifica, strano",
		"certeza, tem certeza, voce tem certeza, mesmo, duvido, parece, me parece, confere, verifica, estranho",
		"zeker, weet je het zeker, echt, twijfel, lijkt, lijkt me, controleer, check, vreemd",
	)
	addLex(lQWord,
		"what, why, how, when, where, which, who, whose, does, do, is, are, can, could, would, will, should, did, isn't, wasn't, don't, didn't, shouldn't, aren't",
		"was, warum, wieso, weshalb, wie, wann, wo, welche, welcher, wer, gilt, kann, konnen, ist, sind",
		"que, por que, porque, como, cuando, donde, cual, quien, puedo, puede, se puede, hay",
		"quoi, pourquoi, comment, quand, ou, quel, quelle, qui, est-ce, peut-on, puis-je",
		"cosa, perche, come, quando, dove, quale, chi, posso, si puo, vale",
		"o que, por que, porque, como, quando, onde, qual, quem, posso, pode, da para",
		"wat, waarom, hoe, wanneer, waar, welke, wie, kan, kun, geldt",
	)
	addLex(lContrast,
		"but, though, however, although, except, yet, still, only, just that, whereas, apart from, other than, aside from, small thing, one thing",
		"aber, doch, jedoch, allerdings, nur, bis auf, ausser",
		"pero, sin embargo, aunque, solo que, excepto, salvo",
		"mais, cependant, pourtant, sauf, seulement, par contre, toutefois",
		"ma, pero, pero, tuttavia, pero, solo che, tranne, eccetto, pero",
		"mas, porem, contudo, embora, exceto, so que, entretanto",
		"maar, echter, behalve, alleen, toch, wel",
	)
	addLex(lRetract,
		"oh wait, wait, never mind, nevermind, my bad, my mistake, my fault, sorry, scratch that, i misread, i was wrong, i stand corrected, you're right, youre right, you are right, false alarm, ignore that, ignore me, forget it, just checked, no wait, actually you're right, fair enough, my error, i typed, i added wrong, i was thinking of, it is right, it's right, that's right, good answer, all good",
		"ach nein, doch, stimmt doch, mein fehler, sorry, vergiss es, hab mich geirrt, ich habe mich geirrt, du hast recht, sie haben recht, alles gut, passt doch, moment",
		"ah no, perdon, perdona, mi error, me equivoque, tienes razon, tiene razon, olvidalo, espera, vale si, esta bien",
		"ah non, pardon, desole, desolee, mon erreur, je me suis trompe, je me suis trompee, vous avez raison, tu as raison, laissez tomber, attendez, c'est bon",
		"ah no, scusa, scusate, errore mio, mi sono sbagliato, mi sono sbagliata, hai ragione, avete ragione, lascia stare, aspetta, giusto",
		"ah nao, desculpa, desculpe, erro meu, me enganei, voce tem razao, tem razao, deixa pra la, espera, pensando bem",
		"oh wacht, wacht, sorry, mijn fout, ik vergiste me, je hebt gelijk, u heeft gelijk, laat maar, klopt toch",
	)
	addLex(lSarc,
		"sure, of course, obviously, clearly, yeah right, oh yes, oh sure, oh great, oh wow, wow, genius, brilliant, bravo, congrats, congratulations, love that, love how, amazing how, what a, thanks for nothing, nice try, good one, well done, top marks, must be, i'm sure, totally, lol, lmao, rofl, as if, i'll just, silly, very convincing, how convenient, convincing, classic, typical, logic, logical, sure thing, great job, next you'll, and i'm the, tell that to, funny how",
		"klar, naturlich, logisch, super, toll, bravo, genial, sicher doch, na klar, ja klar, aha, glückwunsch, gluckwunsch",
		"claro, por supuesto, obvio, genial, bravo, felicidades, si claro, ya claro, que listo, enhorabuena",
		"bien sur, evidemment, genial, bravo, felicitations, c'est ca, mais oui, tant qu'on y est, logique, bien entendu",
		"certo, ovviamente, naturalmente, geniale, bravo, complimenti, come no, logico, sicuro",
		"claro, obvio, com certeza, genial, parabens, muito confiavel, pois sim, logico, ta bom",
		"tuurlijk, natuurlijk, uiteraard, geweldig, bravo, gefeliciteerd, logisch, ja hoor, zeker",
	)
	addLex(lPolicy,
		"expensive, pricey, stingy, harsh, mean, silly, scam, old-fashioned, outdated policy, crazy, insane, absurd, hefty, tight, not enough, too short, too high, too long, too early, too late, please add, please expand, you should, you need, should change, make it longer, would be nice, bummer, sucks that, shame that, such a, steep, a lot, too high, too much, rip-off, ripoff, ridiculous, unfair, outrageous, disappointing, shame, pity, annoying, wish, should offer, need evening, need to expand, please expand, typical, greedy, robbery, daylight robbery, costly, shocking, pathetic policy, not great, but fine, but ok, but okay, i guess, oh well",
		"teuer, zu teuer, schade, unfair, frech, wucher, knapp, kurz, leider, na gut",
		"caro, cara, demasiado caro, una pena, que pena, injusto, abusivo, poco, ojala",
		"cher, chere, trop cher, dommage, injuste, abusif, radin, court, helas",
		"caro, cara, troppo caro, peccato, ingiusto, esagerato, poco, purtroppo",
		"caro, cara, caro demais, pena, que pena, injusto, absurdo, pouco, infelizmente",
		"duur, te duur, jammer, zonde, oneerlijk, belachelijk, kort, helaas",
	)
	addLex(lNotFault,
		"not your fault, not the bot's fault, not the bots fault, not on you, i know, i know now, good to know, anyway, anyways, thanks for telling me, thanks for letting me know, fair enough, but fine, but ok, but okay, that's life, oh well, nothing you can do, i understand, i get it, it is what it is, noted",
		"nicht deine schuld, nicht eure schuld, gut zu wissen, trotzdem, immerhin, egal, na gut, ich weiss",
		"no es culpa tuya, no es tu culpa, bueno saberlo, igual, en fin, ya lo se, lo entiendo, gracias por avisar",
		"ce n'est pas ta faute, ce n'est pas votre faute, bon a savoir, tant pis, enfin, je sais, je comprends, merci de l'info",
		"non e colpa tua, non e colpa vostra, buono a sapersi, pazienza, comunque, lo so, capisco",
		"nao e culpa sua, bom saber, enfim, tudo bem, eu sei, entendo, paciencia",
		"niet jouw schuld, niet jullie schuld, goed om te weten, toch, jammer dan, ik weet het, ik snap het",
	)
	addLex(lFormat,
		"table, list, bullet, bullets, bullet points, format, formatted, json, csv, pdf, spreadsheet, chart, calendar, link, translate, translation, in spanish, in english, in french, in german, also, as well, version, summary, shorter version, example, examples, breakdown, step by step, steps, formula, in km, in miles, in pounds, in kg, send me, give me, show me, show it, can you put, could you put, can you make, could you make, can you also, could you also, can i get, could i get, can i have, email, text, print, copy, paste, template, layout, screenshot",
		"tabelle, liste, stichpunkte, format, auch, als, auf englisch, auf deutsch, ubersetzen, ubersetzung, beispiel, bitte auch, schick, zeig, link, kalender, pdf, zusammenfassung",
		"tabla, lista, formato, tambien, en ingles, en espanol, traducir, traduccion, ejemplo, mandame, enviame, dame, puedes, podrias, enlace, calendario, resumen, version",
		"tableau, liste, format, aussi, en anglais, en francais, traduire, traduction, exemple, envoyez, envoie, donnez, donne, pouvez-vous, pourriez-vous, lien, calendrier, resume, version",
		"tabella, elenco, lista, formato, anche, in inglese, in italiano, tradurre, traduzione, esempio, mandami, dammi, puoi, potresti, link, calendario, riassunto, versione",
		"tabela, lista, formato, tambem, em ingles, em portugues, traduzir, traducao, exemplo, manda, envia, me da, pode, poderia, link, calendario, resumo, versao",
		"tabel, lijst, opsomming, formaat, ook, in het engels, in het nederlands, vertalen, vertaling, voorbeeld, stuur, geef, kun je, kunt u, link, agenda, samenvatting, versie",
	)
	addLex(lLength,
		"long, short, lengthy, brief, verbose, wordy, rambling, essay, novel, paragraph, paragraphs, wall of text, tldr, tl;dr, too much text, nobody reads, just the number, get to the point, one line, one word, shorter, longer, detail, details, more detail, words, 100 words, sentences, long-winded",
		"lang, kurz, ausfuhrlich, zu lang, zu kurz, roman, absatz, kurzer, langer, details, wortreich",
		"largo, larga, corto, corta, demasiado largo, extenso, breve, detalles, parrafo, rollo",
		"long, longue, court, courte, trop long, trop court, bref, details, paragraphe, pavé, pave, roman",
		"lungo, lunga, corto, corta, troppo lungo, breve, dettagli, paragrafo, prolisso",
		"longo, longa, curto, curta, muito longo, breve, detalhes, paragrafo, textao",
		"lang, kort, te lang, te kort, uitgebreid, details, alinea, lap tekst",
	)
	addLex(lTone,
		"tone, formal, casual, rude, smug, condescending, patronising, patronizing, robotic, robot, cold, stiff, salesy, cheesy, pushy, sarcastic, angry, aggressive, friendly, warm, polite, impolite, obviously, emoji, emojis, exclamation, style, register, sounds, corporate, bossy, preachy, snarky, tone it down, chill",
		"ton, formell, steif, frech, unhoflich, kalt, robotisch, roboter, freundlich, herablassend, arrogant, locker",
		"tono, formal, frio, fria, grosero, borde, robot, robotico, amable, condescendiente, pedante, serio",
		"ton, formel, formelle, froid, froide, impoli, robot, condescendant, hautain, sec, seche",
		"tono, formale, freddo, fredda, scortese, robot, robotico, gentile, arrogante, secco",
		"tom, formal, frio, fria, grosseiro, robo, robotico, gentil, arrogante, seco",
		"toon, formeel, stijf, koud, onbeleefd, robot, vriendelijk, arrogant, bot",
	)
	addLex(lYes, "yes, yeah, yep, yup, ja, jawohl, si, sí, oui, ouais, sim, jazeker, klopt")
	addLex(lNo, "no, nope, nah, nein, non, nao, nee, neen")
	addLex(lRequest,
		"please, pls, plz, could you, can you, would you, would be nice, would be great, i'd like, i would like, i need, we need, kindly",
		"bitte, konntest du, kannst du, konnten sie, konnen sie, ware schon, ich hatte gern, ich brauche",
		"por favor, podrias, puedes, podria, me gustaria, necesito, quisiera",
		"s'il vous plait, s'il te plait, svp, stp, pourriez-vous, pouvez-vous, peux-tu, je voudrais, j'aimerais, j'ai besoin",
		"per favore, per piacere, potresti, puoi, mi piacerebbe, vorrei, ho bisogno",
		"por favor, poderia, pode, gostaria, preciso, queria",
		"alsjeblieft, alstublieft, graag, kun je, kunt u, zou je, ik wil graag, ik heb nodig",
	)
	addLex(lFix,
		"fix, fix it, correct it, update, please update, please fix, check, recheck, re-check, count again, look again, try again, redo, change it, amend",
		"korrigieren, korrigiere, berichtigen, aktualisieren, nochmal, nachschauen, prufen, andern",
		"corrige, corrijan, corregir, actualiza, actualizar, revisa, revisar, otra vez, cambia",
		"corrigez, corrige, corriger, mettez a jour, verifiez, refaites, changez",
		"correggi, correggere, aggiorna, aggiornare, controlla, ricontrolla, cambia",
		"corrige, corrija, corrigir, atualiza, atualize, atualizar, verifica, revisa, muda",
		"verbeter, corrigeer, pas aan, aanpassen, update, controleer, nog eens",
	)
	addLex(lCorrCue,
		"actually, should be, should have been, it's, its, it is, it was, that's, thats, is, are, was, were, now, instead, not, rather, really, in fact, true answer, right answer, correct answer, real, says, said, shows, showed, according to, per, the answer is, changed, went up, went down, since, these days, anymore, meant, mean, you mean, i mean, closer to, more like, says so, on the, =, →",
		"eigentlich, sondern, ist, sind, war, waren, sollte, mussen, inzwischen, jetzt, seit, laut, steht, zeigt, betragt, kostet, gilt",
		"en realidad, es, son, era, fue, deberia, ahora, desde, segun, pone, dice, muestra, cuesta, tarda",
		"en fait, c'est, est, sont, etait, devrait, maintenant, depuis, selon, indique, dit, affiche, coute, plutot",
		"in realta, e, sono, era, dovrebbe, ora, adesso, da, secondo, dice, mostra, costa, invece",
		"na verdade, e, sao, era, deveria, agora, desde, segundo, diz, mostra, custa, esta",
		"eigenlijk, is, zijn, was, moet, zou, nu, sinds, volgens, staat, zegt, toont, kost, duurt",
	)
	addLex(lStory,
		"i, i'm, im, i've, ive, i'd, my, me, we, our, us, yesterday, last week, last month, today, this morning, tuesday, monday, friday, when i, so i, then i, because",
		"ich, mein, meine, mir, mich, wir, unser, gestern, heute, letzte woche, letzten monat",
		"yo, mi, me, nosotros, nuestro, ayer, hoy, la semana pasada, el mes pasado",
		"je, j'ai, moi, mon, ma, mes, nous, notre, hier, aujourd'hui, la semaine derniere",
		"io, mio, mia, mi, noi, nostro, ieri, oggi, la settimana scorsa",
		"eu, meu, minha, me, nos, nosso, ontem, hoje, semana passada",
		"ik, mijn, me, mij, wij, we, ons, gisteren, vandaag, vorige week",
	)
	addLex(lSelf, "i, i'm, im, i've, my, me, ich, mein, yo, mi, je, j'ai, moi, io, eu, ik, mijn")
	addLex(lIdeal,
		"love, loved, helped, nailed, saved, works, worked, solved, sorted, recommend, appreciate, exactly what i needed, just what i needed, what i needed, what i was looking for, made my day, you're the best",
		"geholfen, gerettet, funktioniert, liebe, empfehle, genau das",
		"me encanta, me ayudo, funciona, justo lo que", "ca m'a aide, ca marche, j'adore, exactement ce",
		"mi ha aiutato, funziona, adoro, proprio quello", "me ajudou, funciona, adorei, exatamente o que",
		"geholpen, werkt, top, precies wat",
	)
	addLex(lComplaintN,
		"complaint, complaints, complain, complain about, nothing to complain about, problem, problems, issue, issues, notes, note, fault, faults, mistake, mistakes, error, errors, objection, objections, argue, argument, quibble, quibbles, shabby, worries, beef, gripe, gripes, fault it, wrong with",
		"beschwerde, beschwerden, beschweren, problem, probleme, fehler, einwand, einwande, klagen, meckern, auszusetzen, zu meckern, nichts auszusetzen",
		"queja, quejas, quejarme, quejarse, reclamar, problema, problemas, error, errores, pega, pegas, objecion, reproche, fallo, fallos",
		"plainte, plaintes, plaindre, rien a redire, probleme, problemes, souci, soucis, erreur, erreurs, reproche, reproches, faute, redire, a redire",
		"lamentela, lamentele, lamentarsi, lamentarmi, niente da dire, reclamo, reclami, problema, problemi, errore, errori, obiezione, obiezioni, difetto",
		"reclamacao, reclamacoes, reclamar, nada a reclamar, queixa, queixar, queixas, problema, problemas, erro, erros, objecao, defeito",
		"klacht, klachten, klagen, niets op aan te merken, probleem, problemen, fout, fouten, bezwaar, bezwaren, aan te merken, op aan te merken",
	)
	addLex(lIntent,
		"i'll, ill, i will, we'll, we will, will, going to, gonna, tomorrow, later, next week, tonight, soon, let me, i'm going, we'll see, i'll see, i'll check, i'll try, i'll ask, i'll wait, i'll call, i'll order, will order, will do, for now",
		"ich werde, werde, wir werden, morgen, spater, nachste woche, mal sehen, ich schaue, ich probiere",
		"voy a, vamos a, manana, luego, despues, la semana que viene, ya veremos, lo pruebo",
		"je vais, on va, demain, plus tard, la semaine prochaine, on verra, je regarde",
		"vado a, domani, dopo, piu tardi, la settimana prossima, vedremo, provero",
		"vou, vamos, amanha, depois, mais tarde, semana que vem, vamos ver",
		"ik ga, we gaan, morgen, straks, later, volgende week, we zien wel",
	)
	addLex(lOther,
		"website, site, web, app, newsletter, font, logo, design, weather, rain, raining, snow, sunny, holiday, holidays, christmas, xmas, new year, happy new year, merry christmas, easter, birthday, team, staff, driver, courier guy, cat, dog, kids, son, daughter, husband, wife, mum, mom, dad, grandma, teacher, school, homework, football, game, music, coffee, lunch, dinner, weekend, vacation, keyboard, phone, tablet, laptop, printer, dream, robot uprising",
		"webseite, website, seite, app, newsletter, schrift, logo, wetter, regen, schnee, urlaub, weihnachten, frohe weihnachten, neujahr, frohes neues, team, fahrer, katze, hund, kinder, sohn, tochter, mann, frau, mama, papa, lehrer, schule, fussball, kaffee, wochenende, handy, tablet",
		"web, pagina, sitio, app, boletin, letra, logo, tiempo, lluvia, llueve, vacaciones, navidad, feliz navidad, feliz ano, ano nuevo, equipo, repartidor, gato, perro, hijos, hijo, hija, marido, mujer, mama, papa, profesor, escuela, futbol, cafe, fin de semana, movil",
		"site, appli, application, newsletter, police, logo, meteo, pluie, neige, vacances, noel, joyeux noel, bonne annee, equipe, livreur, chat, chien, enfants, fils, fille, mari, femme, maman, papa, prof, ecole, foot, cafe, week-end, telephone, portable",
		"sito, app, newsletter, carattere, logo, tempo, pioggia, piove, neve, vacanze, natale, buon natale, buon anno, squadra, corriere, gatto, cane, figli, figlio, figlia, marito, moglie, mamma, papa, maestra, scuola, calcio, caffe, fine settimana, telefono",
		"site, app, aplicativo, newsletter, fonte, logo, tempo, chuva, chovendo, ferias, natal, feliz natal, feliz ano novo, equipe, entregador, gato, cachorro, filhos, filho, filha, marido, esposa, mae, pai, professora, escola, futebol, cafe, fim de semana, celular",
		"website, site, app, nieuwsbrief, lettertype, logo, weer, regen, sneeuw, vakantie, kerst, fijne kerst, fijne feestdagen, feestdagen, gelukkig nieuwjaar, team, bezorger, kat, hond, kinderen, zoon, dochter, man, vrouw, mama, papa, juf, school, voetbal, koffie, weekend, telefoon, tablet",
	)
	addLex(lGreet, "happy new year, merry christmas, happy holidays, frohe weihnachten, frohes neues, feliz navidad, feliz ano nuevo, bonne annee, joyeux noel, buon natale, buon anno, feliz natal, feliz ano novo, fijne feestdagen, gelukkig nieuwjaar, prettige feestdagen")
	addLex(lPos|lIdeal,
		"no complaints, no complaint, nothing to complain about, can't complain, cant complain, can't fault it, cant fault it, can't argue, cant argue, can't argue with that, no notes, no issues, no problems, no problem at all, nothing wrong, all good",
		"keine beschwerden, nichts auszusetzen, nichts zu meckern, alles gut, alles bestens, kein problem",
		"sin quejas, ninguna queja, nada que objetar, nada que decir, todo bien, ningun problema",
		"aucune plainte, rien a redire, rien a dire, tout est bon, aucun probleme, rien a reprocher",
		"nessuna lamentela, niente da dire, nulla da dire, tutto bene, nessun problema, niente da ridire",
		"nada a reclamar, sem reclamacoes, tudo certo, nenhum problema, nada a dizer",
		"geen klachten, niets op aan te merken, alles goed, geen probleem, niks mis mee",
	)
	addLex(lNeg|lTone, "unfreundlich, seco, seca, secco, secca, sec, seche, brusque, bruto, grosseiro, grossolano, bot, kortaf, chagrin")
	addLex(lDoubt, "optimistic, too good to be true, where does that come from, where did you get that, source?, says who, unlikely, doubt it, zu optimistisch, demasiado optimista, trop optimiste, troppo ottimista, otimista demais, te optimistisch")
	addLex(lPolicy, "troppi, troppe, demasiados, demasiadas, zu viel, te veel, trop cher, demais, excessive, steep")
	addLex(lRetract,
		"oops, whoops, nvm, disregard, disregard that, ignore my comment, ignore my last, i take it back, take that back, i take that back, my apologies, apologies, misread, i misremembered, on second thought, on second thoughts, hang on, hold on, you were right, it was right, checked again, double-checked, rechecked, i stand corrected, my mistake sorry, false alarm, no wait",
		"ups, hoppla, nehme alles zuruck, ich nehme das zuruck, nehme es zuruck, entschuldigung, mein irrtum, falscher alarm, verlesen, verguckt, stimmt ja, doch richtig, hast recht, haben recht, war richtig, vergessen sie das, vergiss das, warte",
		"ups, uy, disculpa, disculpe, error mio, lo retiro, retiro lo dicho, lei mal, falsa alarma, tenias razon, tenia razon, ya lo vi, olvida lo que dije, olvide lo que dije, me confundi",
		"oups, autant pour moi, au temps pour moi, je retire, je retire ce que j'ai dit, j'ai mal lu, fausse alerte, oubliez, oublie ca, vous aviez raison, tu avais raison, excusez-moi, je me suis trompe, je me suis trompee, c'est bien ca",
		"ops, chiedo scusa, colpa mia, mi correggo, ho letto male, falso allarme, lascia perdere, avevi ragione, aveva ragione, ritiro, mi sono confuso, mi sono confusa, non ci avevo fatto caso",
		"opa, foi mal, li errado, li mal, alarme falso, esquece, esqueca, voce tinha razao, tinha razao, retiro o que disse, me confundi, perdao",
		"oeps, mijn excuses, excuses, verkeerd gelezen, vals alarm, vergeet het, vergeet wat ik zei, je had gelijk, u had gelijk, toch goed, ik vergis me, ik had het mis, sorry hoor",
	)
	addLex(lOther,
		"parking, car park, opening ceremony, podcast, instagram, facebook, twitter, tiktok, youtube, ad, ads, advert, advertisement, commercial, colours, colors, colour, color, wallpaper, music, song, playlist, weather today, traffic, bus, train ride, office, neighbour, neighbor, boss, colleague, friend, friends, sister, brother, baby, puppy, kitten, garden, birthday party, wedding, match, concert, movie, film, series, book, novel, joke, jokes, poem, your name, favourite, favorite, hobby, hobbies, sleep, tired, hungry, goodnight, good night, mascot, uniform, packaging, box design, jingle, slogan, chatbot avatar, avatar, emoji",
		"parkplatz, werbung, farben, musik, lied, verkehr, buro, nachbar, chef, kollege, freund, freunde, schwester, bruder, baby, garten, hochzeit, konzert, film, serie, buch, witz, lieblings, hobby, mude, hunger, gute nacht, verpackung, maskottchen",
		"aparcamiento, publicidad, anuncio, colores, musica, cancion, trafico, oficina, vecino, jefe, companero, amigo, amigos, hermana, hermano, bebe, jardin, boda, concierto, pelicula, serie, libro, chiste, favorito, cansado, hambre, buenas noches, embalaje, mascota",
		"parking, publicite, pub, couleurs, musique, chanson, trafic, bureau, voisin, patron, collegue, ami, amis, soeur, frere, bebe, jardin, mariage, concert, film, serie, livre, blague, prefere, fatigue, faim, bonne nuit, emballage, mascotte",
		"parcheggio, pubblicita, colori, musica, canzone, traffico, ufficio, vicino di casa, capo, collega, amico, amici, sorella, fratello, bambino, giardino, matrimonio, concerto, film, serie, libro, barzelletta, preferito, stanco, fame, buonanotte, imballaggio, mascotte",
		"estacionamento, publicidade, anuncio, cores, musica, cancao, transito, escritorio, vizinho, chefe, colega, amigo, amigos, irma, irmao, bebe, jardim, casamento, show, filme, serie, livro, piada, favorito, cansado, fome, boa noite, embalagem, mascote",
		"parkeren, reclame, kleuren, muziek, liedje, verkeer, kantoor, buurman, buurvrouw, baas, collega, vriend, vrienden, zus, broer, baby, tuin, bruiloft, concert, film, serie, boek, grap, favoriet, moe, honger, welterusten, verpakking, mascotte",
	)
	addLex(lPolicy,
		"overpriced, too expensive, unreasonable, a shame, what a shame, disappointing policy, wish you, wish it, i wish, should be longer, should be free, not fair, bit much, a bit much, hard to believe, silly rule, annoying rule, inconvenient, frustrating policy, poor policy",
		"zu teuer, teuer, ungerecht, unfair, schade, argerlich, nervig, unpraktisch, happig, wucher, frech, knauserig, geizig",
		"caro, carisimo, demasiado caro, injusto, una pena, que pena, lastima, que lastima, molesto, abusivo, un abuso, poco practico",
		"cher, trop cher, injuste, dommage, quel dommage, c'est dommage, agacant, penible, abusif, pas pratique, radin",
		"caro, troppo caro, ingiusto, peccato, che peccato, fastidioso, scomodo, esagerato, assurdo",
		"caro, muito caro, injusto, pena, que pena, uma pena, chato, abusivo, pouco pratico, absurdo",
		"duur, te duur, oneerlijk, jammer, wat jammer, vervelend, onhandig, belachelijk, gierig, krenterig",
	)
	addLex(lInfoAck,
		"good to know, now i know, at least i know, at least now i know, at least it's clear, at least its clear, at least that's clear, thanks for the info, thanks for the information, thanks for clarifying, thanks for confirming, thanks for letting me know, thanks for explaining, thanks for the heads up, that's clear, i understand, understood, noted, fair enough, i'll live with it, i'll deal with it, so be it, it is what it is",
		"gut zu wissen, dann weiss ich bescheid, weiss ich bescheid, jetzt weiss ich es, jetzt weiss ich, danke fur die info, danke fur die auskunft, danke fur die information, danke fur die klarstellung, wenigstens weiss ich, immerhin weiss ich, immerhin ehrlich, verstanden, na gut, dann eben",
		"bueno saberlo, es bueno saberlo, ahora lo se, ya lo se, gracias por la info, gracias por la informacion, gracias por aclararlo, gracias por aclarar, gracias por avisar, al menos esta claro, al menos lo se, por lo menos lo se, entendido, queda claro",
		"bon a savoir, maintenant je sais, merci pour l'info, merci pour l'information, merci de l'info, merci de la precision, merci pour la precision, au moins c'est clair, au moins je sais, au moins je suis fixe, c'est note, je comprends, tant pis",
		"buono a sapersi, ora lo so, adesso lo so, grazie dell'info, grazie per l'info, grazie per l'informazione, grazie dell'informazione, grazie della precisione, almeno e chiaro, almeno lo so, capito, pazienza",
		"bom saber, agora eu sei, agora sei, pelo menos agora eu sei, agora ja sei, obrigado pela informacao, obrigada pela informacao, obrigado pela info, obrigada pela info, valeu pela info, pelo menos esta claro, pelo menos agora sei, entendi, mas ta, fazer o que",
		"goed om te weten, nu weet ik het, dan weet ik het, dan weet ik dat, bedankt voor de info, bedankt voor de informatie, dank voor de info, bedankt voor de uitleg, dan weet ik waar ik aan toe ben, in ieder geval duidelijk, begrepen, jammer dan",
	)
	addLex(lPolicy,
		"policy, policies, rule, rules, terms, fee, fees, surcharge, strict, inflexible, rigid, stingy, tight-fisted, makes no sense, doesn't make sense, in this day and age, you should change, should change that, bring back, please offer, please allow, why not allow, shame you don't, pity you don't, wish you would, would be great if, it would be nice, would be nice if, other shops, other stores, everyone else, competitors",
		"richtlinie, regel, regeln, regelung, bedingungen, gebuhr, gebuhren, aufschlag, streng, unflexibel, andere shops, andere handler, sollte man andern, konnte man andern, ware schon, ware nett",
		"politica, norma, normas, regla, reglas, condiciones, recargo, comision, estricto, estricta, inflexible, racano, racana, tacano, otras tiendas, deberiais cambiar, podrian cambiar, estaria bien, seria genial",
		"politique, regle, regles, conditions, frais, supplement, strict, stricte, rigide, abuse, radin, les autres magasins, vous devriez changer, ce serait bien, ce serait sympa",
		"politica, regola, regole, condizioni, commissione, supplemento, rigido, rigida, severo, severa, vergogna, una vergogna, rapina, altri negozi, dovreste cambiare, sarebbe bello",
		"politica, regra, regras, condicoes, taxa, taxas, tarifa, rigido, rigida, severo, severa, bem que podia, podia ser, outras lojas, deveriam mudar, seria bom",
		"beleid, regel, regels, voorwaarden, toeslag, kosten, streng, strenge, star, gierig, andere winkels, zouden jullie moeten, zou fijn zijn, zou mooi zijn",
	)
	addLex(lRight,
		"that's what, thats what, that is what, just like you said, like you said, as you said, as you say, as stated, same as you said, matches what, lines up, checks out",
		"wie gesagt, wie ihr sagt, wie du sagst, wie sie sagen, steht auch, deckt sich, passt zu",
		"como dijiste, como dices, como dijisteis, como decis, es lo que pone, es lo que dice, lo mismo que, cuadra",
		"comme vous dites, comme tu dis, comme vous l'avez dit, c'est bien ce, c'est ce que, ca colle, ca correspond",
		"come hai detto, come dite, come avete detto, e quello che, torna, tornano, combacia, corrisponde",
		"como voce disse, como voces falaram, como falaram, como disseram, isso mesmo, certinho, bate certinho, confere",
		"zoals je zei, zoals jullie zeiden, zoals u zei, dat is wat, komt overeen, klopt helemaal, klopt precies",
	)
	addLex(lRetract,
		"ah yes, oh yes it is, oh right, ah right, ah ok, ah okay, oh ok, oh okay, counting wrong, i'm counting wrong, i'm thinking of, thinking of, was thinking of, i was looking at, was showing, it's fine then, is fine then, all correct then, you're correct, fine then",
		"ah doch, ach doch, ah ja, ach so, ach ja, stimmt also, dann passt es, dann stimmt es",
		"ah si, ah vale, ah claro, que era, teneis razon, entonces esta bien, pues esta bien",
		"ah si, ah oui, ah d'accord, c'est juste, alors c'est bon, donc c'est bon",
		"ah si, ah ok, ah gia, allora va bene, quindi e giusto",
		"ah sim, ah ta, ah e, entao esta certo, entao ta certo, peraí, perai",
		"ah ja, o ja, oh ja, klopt dus, dan klopt het, dan is het goed",
	)
	addLex(lOther,
		"wifi, wi-fi, internet connection, signal, heat, heatwave, hot in here, summer, winter, store, shop, boutique, branch, new store, new shop, delivery driver, raise, wrong window, wrong tab, wrong chat, wrong thread, dark mode, light mode, tiny, happy friday, happy monday, typing this, the queue at",
		"hitze, sommer, winter, laden, geschaft, filiale, falsches fenster, falscher chat, es regnet, regnet",
		"calor, verano, invierno, tienda, sucursal, ventana equivocada, chat equivocado, llueve",
		"chaleur, ete, hiver, magasin, boutique, pleut, il pleut, mauvaise fenetre, mauvais onglet, mauvaise conversation",
		"caldo, estate, inverno, negozio, filiale, finestra sbagliata, sbagliato finestra, chat sbagliata, sbagliato chat",
		"calor, verao, inverno, loja, filial, janela errada, chat errado, chovendo, ta chovendo",
		"hitte, zomer, winter, winkel, filiaal, verkeerde venster, verkeerde chat, het regent, regent",
	)
	addLex(lSarc,
		"10/10, chef's kiss, how generous, so generous, how helpful, so helpful, can't wait, cant wait, remind me, begs to differ, good laugh, had a good laugh, what a surprise, shocker, big surprise, who knew, thanks a bunch, even my, 😏, 🙃",
		"wird sich freuen, werden sich freuen, wer hatte das gedacht, wie grosszugig, kann es kaum erwarten",
		"se va a alegrar, van a encantar, quien lo diria, que generoso, que sorpresa, estoy deseando",
		"va adorer, vont adorer, quelle surprise, que c'est genereux, j'ai hate",
		"sara contento, saranno contenti, che sorpresa, che generosi, non vedo l'ora",
		"vai adorar, vao adorar, que surpresa, que generoso, mal posso esperar",
		"gaat blij zijn, wat een verrassing, wat gul, ik kan niet wachten",
	)
	addLex(lTone,
		"lecture, lecturing, gloomy, cheerful, informal, too informal, too casual, moody, dramatic, over the top, too enthusiastic, blunt, curt, harsh, sassy, passive-aggressive, judgy, judgmental, a sorry, an apology, no need for",
		"belehrend, moralisierend, salopp, zu locker, zu salopp, schroff, unpersonlich, herzlos, düster, duster, oberlehrerhaft",
		"sermon, sermoneador, moralista, informal, demasiado informal, brusco, seco, frio, antipatico, tristón, triste",
		"moralisateur, sermon, familier, trop familier, brusque, sec, lugubre, sinistre, desagreable",
		"predica, paternalista, informale, troppo informale, brusco, lugubre, cupo, antipatico",
		"sermao, moralista, informal, informal demais, muito informal, brusco, seco, sombrio, antipatico",
		"preek, belerend, betuttelend, informeel, te informeel, bot, kortaf, somber, onvriendelijk",
	)
	addLex(lComplaintN, "beklagen, beklage, klage, reclamo, reclamar, plaindre, lamentare, reclamar, klagen, zeuren")
	addLex(lPos|lIdeal, "couldn't be clearer, could not be clearer, couldn't be better, could not be better, can't ask for more, pas mal, nicht schlecht, no esta mal, non male, nada mal, niet slecht")
	addLex(lAck, "mm, mmm, mm-hm, mhm, uh-huh, uh huh, aha, ah ok")
	addLex(lGreet, "hallo zusammen, hallo allerseits, hola a todos, bonjour a tous, ciao a tutti, ola a todos, hallo allemaal, hi all, hi everyone, hello everyone")
	addLex(lContra,
		"then why, so why, then how, so how, how come, then what, so what is, why then, how then, if so why, but then why",
		"dann warum, warum dann, wieso dann, weshalb dann, wie kommt es, wie kann es sein, und warum",
		"entonces por que, y entonces por que, pues por que, como es que, entonces como, y por que entonces",
		"alors pourquoi, pourquoi alors, comment se fait-il, alors comment, et pourquoi",
		"allora perche, e allora perche, come mai, allora come, e perche allora",
		"entao por que, entao porque, e por que entao, como assim, entao como",
		"waarom dan, hoe kan het dan, hoe komt het, en waarom, dan waarom",
	)
	addLex(lNeg|lWrong, "lie, lying, liar, luge, gelogen, mentira, mentiras, mentiroso, mensonge, mensonges, menteur, menzogna, bugia, bugiardo, leugen, gelogen, onzin")
	addLex(lPos|lIdeal, "nada a apontar, nada a assinalar, niet verkeerd, helemaal niet verkeerd, pas faux, nicht verkehrt, nada mal, non sbagliato")
	addLex(lNeg|lLength, "bit short, a bit short, bit too short, bit long, a bit long, un peu court, un peu long, etwas kurz, etwas lang, un poco corto, un poco largo, un po' corto, un po' lungo, um pouco curto, um pouco longo, iets kort, wat kort, iets te kort, iets te lang")
	addLex(lOther,
		"snowing, it's snowing, freezing, sunny, so cold, cold today, hot today, che freddo, che caldo, fa freddo, fa caldo, hace frio, hace calor, il fait froid, il fait chaud, faz frio, faz calor, het is koud, het is warm, es ist kalt, es ist heiss, schneit, es schneit, sneeuwt, het sneeuwt, nieva, neige, il neige, nevica, neva",
		"by the way, btw, unrelated, off topic, random but, ignore any typos, sent by mistake, wrong message, ubrigens, aus versehen, nebenbei, por cierto, por error, sin querer, au fait, par erreur, a propos, a proposito, per sbaglio, tra l'altro, por falar nisso, sem querer, por engano, trouwens, per ongeluk, overigens, in the background, neighbour, neighbor, buurman, nachbar, vecino, voisin, vicino, vizinho, good luck, bonne chance, buena suerte, buona fortuna, boa sorte, viel gluck, veel succes",
	)
	addLex(lInfoAck, "thanks for the reminder, ta for the reminder, thanks for the heads-up, ja sei, agora ja sei, ya lo se, je sais maintenant, ora lo so, jetzt weiss ich, nu weet ik het")
	addLex(lNotFault, "not you, not on you, not your doing, that's not on you, mas pronto, ma pazienza, enfin bon, bon ben, aber na ja, naja, maar ja, pero en fin, en fin, mas enfim, enfim, that's the council, not the bot")
	addLex(lNeg|lPolicy, "disgraceful, a joke, what a joke, ubertrieben, uebertrieben, carisimo, carisima, carissimo, carissima, carissimas, carissimos, muy pronto, demasiado pronto, trop tot, troppo presto, muito cedo, te vroeg, zu fruh, bizarre rule, chata, regra chata")
	addLex(lNeg|lPolicy, "unverschamt, frechheit, zumutung, sinnlos, una verguenza, vergonzoso, scandaleux, honteux, scandaloso, vergognoso, vergonhoso, um roubo, schandalig, een schande")
	addLex(lPos|lSarc, "bravissimo, bravissima, bravissimi, bravissime")
	addLex(lFormat, "yaml, xml, markdown, html, docx, excel, word document, plain text, bullet list, numbered list, csv file, json file")
	addLex(lPos|lIdeal,
		"no complaints here, zero complaints, can't fault, cannot fault, nothing to fault, not a single complaint, no errors, no mistakes, didn't disappoint, doesn't disappoint, no notes at all",
		"nicht zu beanstanden, nichts zu beanstanden, kein grund zur klage, keine klagen, einwandfrei",
		"no tengo quejas, nada de malo, nada que reprochar, ninguna pega, sin pegas",
		"aucun souci, rien a reprocher, je n'ai rien a redire, rien a signaler, pas de souci",
		"nulla da eccepire, niente da eccepire, nulla da ridire, niente da ridire, nessuna critica",
		"nao tenho do que reclamar, sem defeitos, nada de errado, sem problemas",
		"geen op- of aanmerkingen, geen enkel probleem, niks op aan te merken, niets mis mee",
	)
	addLex(lNotFault, "but ok, but okay, but fine, ma ok, ma va bene, mais bon, mais d'accord, aber ok, aber gut, pero bueno, pero vale, mas tudo bem, mas ok, maar goed, maar oke")
	addLex(lAlso, "also, too, as well, same, auch, ebenfalls, genauso, tambien, igual, aussi, pareil, egalement, anche, pure, uguale, tambem, igual, ook, eveneens, hetzelfde")
	addLex(lSarc, "that's why, thats why, must be why, which is why, so that's why, deshalb, darum, deswegen, por eso, por isso, c'est pour ca, voila pourquoi, ecco perche, per questo, daarom, dus daarom")
	addLex(lRef,
		"you, your, you're, youre, u, ur, this, that, that's, thats, it, it's, its, answer, answered, reply, response, bot, assistant, info, information, summary, tweet, translation, text, explanation, result, here, those, these, told, said, wrote, gave, says",
		"du, dein, deine, ihr, euer, eure, sie, ihre, das, dies, diese, es, antwort, bot, info, information, zusammenfassung, ubersetzung, text, erklarung",
		"tu, tus, usted, su, esto, eso, esta, ese, respuesta, bot, info, informacion, resumen, traduccion, texto, explicacion",
		"tu, vous, votre, ton, ta, ca, cela, ce, c'est, ceci, reponse, bot, info, information, resume, traduction, texte, explication",
		"tu, tuo, tua, voi, vostro, questo, questa, quello, cio, risposta, bot, info, informazione, riassunto, traduzione, testo, spiegazione",
		"voce, tu, teu, tua, seu, sua, isso, isto, esse, essa, resposta, bot, info, informacao, resumo, traducao, texto, explicacao",
		"je, jij, jouw, u, uw, dit, dat, het, antwoord, bot, info, informatie, samenvatting, vertaling, tekst, uitleg",
	)
}

// lexMatch returns the classes of the word or the longest phrase that
// starts at toks[i] and the number of tokens it spans (0 if none).
func lexMatch(toks []tok, i int) (lclass, int) {
	w := toks[i].low
	for _, p := range lexPhrases[w] {
		if i+len(p.words) > len(toks) {
			continue
		}
		ok := true
		for k := 1; k < len(p.words); k++ {
			if toks[i+k].low != p.words[k] || toks[i+k].sent != toks[i].sent {
				ok = false
				break
			}
		}
		if ok {
			return p.class, len(p.words)
		}
	}
	if c, ok := lexWords[w]; ok {
		return c, 1
	}
	if toks[i].kind == tWord {
		if c, ok := lexFuzzy(w); ok {
			return c, 1
		}
	}
	return 0, 0
}

// lexDeletes indexes the lexicon's words of five letters or more by each
// string with one letter deleted, for typo-tolerant lookup.
var lexDeletes = map[string]string{}

func init() {
	words := make([]string, 0, len(lexWords))
	for w := range lexWords {
		words = append(words, w)
	}
	sort.Strings(words)
	for _, w := range words {
		if len(w) < 5 || !isLetters(w) {
			continue
		}
		for i := 0; i < len(w); i++ {
			d := w[:i] + w[i+1:]
			if _, ok := lexDeletes[d]; !ok {
				lexDeletes[d] = w
			}
		}
	}
}

// lexFuzzy looks up a misspelt word: letter runs collapsed ("grazieee",
// "giustoo"), then one insertion, deletion, substitution or swap of a
// lexicon word of five letters or more ("perfeto", "grasias", "dnake").
func lexFuzzy(w string) (lclass, bool) {
	for _, n := range []int{2, 1} {
		if c := collapseRuns(w, n); c != w {
			if cl, ok := lexWords[c]; ok {
				return cl, true
			}
		}
	}
	if c := collapseDoubles(w); c != w {
		if cl, ok := lexWords[c]; ok {
			return cl, true
		}
	}
	if len(w) < 5 || !isLetters(w) {
		return 0, false
	}
	if _, ok := langStop[w]; ok {
		return 0, false
	}
	if _, n := unitAt([]tok{{low: w, kind: tWord}}, 0); n > 0 {
		return 0, false
	}
	// w is a lexicon word with a letter missing
	if t, ok := lexDeletes[w]; ok {
		return lexWords[t], true
	}
	for i := 0; i < len(w); i++ {
		d := w[:i] + w[i+1:]
		// w has an extra letter
		if cl, ok := lexWords[d]; ok && len(d) >= 5 {
			return cl, true
		}
		// a swap of two letters, or (in long words) a substituted one
		if t, ok := lexDeletes[d]; ok && len(t) == len(w) && (swapped(w, t) || len(w) >= 7 && editDistance1(w, t)) {
			return lexWords[t], true
		}
	}
	return 0, false
}

// swapped reports whether a and b differ by one swap of adjacent letters.
func swapped(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	i := 0
	for i < len(a) && a[i] == b[i] {
		i++
	}
	return i+1 < len(a) && a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:]
}

// collapseDoubles shortens every run of a letter to one letter
// ("giustoo" -> "giusto"); a lookup fallback only.
func collapseDoubles(w string) string {
	var b strings.Builder
	var prev rune
	for _, r := range w {
		if r != prev {
			b.WriteRune(r)
		}
		prev = r
	}
	return b.String()
}

// langStop are frequent function words per language, used to guess the
// language of a text (for number formats and features).
var langStop = map[string]string{}

func init() {
	for lang, list := range map[string]string{
		"en": "the a an is it it's this that to of and or i you not was are be for in on with my we your what why how please can will do did have has should would could at but so too very just all more one now been were they them there here when then than as by from about out up get got only also its isn't don't doesn't didn't wasn't thanks thank",
		"de": "der die das ist und nicht ein eine es ich sie wir ihr mit auf fur zu von den dem des im ist sind war aber auch nur noch schon bitte danke nein ja wie was warum wo hat habe hatte kann konnen sehr gut falsch richtig stimmt doch mal euer eure",
		"es": "el la los las es un una y no de que en por para con lo del al se su pero muy mas ya esta son fue era yo mi me gracias si tu hay como cuando donde porque tambien",
		"fr": "le la les est un une et ne pas de du des que en pour avec ce c'est je vous nous il elle mais tres plus deja sont etait merci oui non au aux qui quoi comment pourquoi ou j'ai l'ai",
		"it": "il lo la gli le e un una non di che in per con del della sono era ma molto piu gia grazie si mi ho l'ho cosa perche come quando dove anche questo quello",
		"pt": "o a os as e um uma nao de que em para com do da dos das sao era mas muito mais ja obrigado obrigada sim eu meu minha voce esta isso isto como quando onde tambem",
		"nl": "de het een is en niet van dat in op voor met te zijn was maar ook heel al dank bedankt ja nee ik je jij we wij u hij zij wat waarom hoe waar wanneer dit deze die er",
	} {
		for _, w := range strings.Fields(list) {
			if langStop[w] == "" {
				langStop[w] = lang
			} else if langStop[w] != lang {
				langStop[w] = "*" // shared: no evidence
			}
		}
	}
}

// guessLang returns the most likely language of toks among en, de, es,
// fr, it, pt, nl ("" when there is no evidence).
func guessLang(toks []tok) string {
	counts := map[string]int{}
	for _, t := range toks {
		if t.kind != tWord {
			continue
		}
		if l := langStop[t.low]; l != "" && l != "*" {
			counts[l]++
		}
	}
	best, bn := "", 0
	for _, l := range []string{"en", "de", "es", "fr", "it", "pt", "nl"} {
		if counts[l] > bn {
			best, bn = l, counts[l]
		}
	}
	return best
}
