package feedback

import "strings"

// English names of places (GUIDE.md: "English name for places that have
// one": "Berna" is "Bern", "Brasilia" is "Brasília"), seas, continents and
// planets. Keys are folded
// (lower case, no diacritics); each line is the English name followed by
// its forms in German, Spanish, French, Italian, Portuguese and Dutch.
// Forms that are also ordinary words in one of the languages (German
// "Island" for Iceland, "Nil") are left out. The list is general geography: the
// countries, capitals, large cities and rivers that a customer is likely
// to name, not the places of a particular data set.
var placeLines = []string{
	// countries
	"Germany: Deutschland, Alemania, Allemagne, Germania, Alemanha, Duitsland",
	"Spain: Spanien, España, Espagne, Spagna, Espanha, Spanje",
	"France: Frankreich, Francia, França, Frankrijk",
	"Italy: Italien, Italia, Italie, Itália, Italië",
	"Portugal: Portogallo",
	"Netherlands: Niederlande, Países Bajos, Pays-Bas, Paesi Bassi, Países Baixos, Nederland, Holanda, Hollande, Olanda",
	"Switzerland: Schweiz, Suiza, Suisse, Svizzera, Suíça, Zwitserland",
	"Austria: Österreich, Autriche, Áustria, Oostenrijk",
	"Belgium: Belgien, Bélgica, Belgique, Belgio, België",
	"United Kingdom: Vereinigtes Königreich, Reino Unido, Royaume-Uni, Regno Unito, Verenigd Koninkrijk",
	"England: Inglaterra, Angleterre, Inghilterra, Engeland",
	"Scotland: Schottland, Escocia, Écosse, Scozia, Escócia, Schotland",
	"Ireland: Irland, Irlanda, Irlande, Ierland",
	"Greece: Griechenland, Grecia, Grèce, Grécia, Griekenland",
	"Sweden: Schweden, Suecia, Suède, Svezia, Suécia, Zweden",
	"Norway: Norwegen, Noruega, Norvège, Norvegia, Noorwegen",
	"Denmark: Dänemark, Dinamarca, Danemark, Danimarca, Denemarken",
	"Finland: Finnland, Finlandia, Finlande, Finlândia",
	"Poland: Polen, Polonia, Pologne, Polónia, Polônia",
	"Hungary: Ungarn, Hungría, Hongrie, Ungheria, Hungria, Hongarije",
	"Croatia: Kroatien, Croacia, Croatie, Croazia, Croácia, Kroatië",
	"Russia: Russland, Rusia, Russie, Rússia, Rusland",
	"Turkey: Türkei, Turquía, Turquie, Turchia, Turquia, Turkije",
	"Egypt: Ägypten, Egipto, Égypte, Egitto, Egito, Egypte",
	"Morocco: Marokko, Marruecos, Maroc, Marocco, Marrocos",
	"South Africa: Südafrika, Sudáfrica, Afrique du Sud, Sudafrica, África do Sul, Zuid-Afrika",
	"Japan: Japón, Japon, Giappone, Japão",
	"China: Cina, Chine",
	"India: Indien, Inde, Índia",
	"Brazil: Brasilien, Brasil, Brésil, Brasile, Brazilië",
	"Mexico: Mexiko, México, Mexique, Messico",
	"Argentina: Argentinien, Argentine, Argentinië",
	"Canada: Kanada, Canadá",
	"Australia: Australien, Australie, Austrália, Australië",
	"New Zealand: Neuseeland, Nueva Zelanda, Nouvelle-Zélande, Nuova Zelanda, Nova Zelândia, Nieuw-Zeeland",
	"United States: Vereinigte Staaten, Estados Unidos, États-Unis, Stati Uniti, Verenigde Staten",
	// cities
	"Bern: Berna, Berne",
	"Brasília: Brasilia",
	"Rome: Rom, Roma",
	"Lisbon: Lissabon, Lisboa, Lisbonne, Lisbona",
	"London: Londres, Londra, Londen",
	"Paris: Parigi, Parijs",
	"Munich: München, Múnich, Monaco di Baviera, Munique",
	"Cologne: Köln, Colonia, Colônia, Keulen",
	"Vienna: Wien, Viena, Vienne, Wenen",
	"Brussels: Brüssel, Bruselas, Bruxelles, Bruxelas, Brussel",
	"The Hague: Den Haag, La Haya, La Haye, L'Aia, Haia",
	"Athens: Athen, Atenas, Athènes, Atene, Athene",
	"Moscow: Moskau, Moscú, Moscou, Mosca, Moskou",
	"Warsaw: Warschau, Varsovia, Varsovie, Varsavia, Varsóvia",
	"Prague: Prag, Praga, Praag",
	"Copenhagen: Kopenhagen, Copenhague, Copenaghen, Copenhaga",
	"Stockholm: Estocolmo, Stoccolma",
	"Bucharest: Bukarest, Bucarest, Bucareste, Boekarest",
	"Belgrade: Belgrad, Belgrado",
	"Beijing: Peking, Pekín, Pékin, Pechino, Pequim",
	"Tokyo: Tokio, Tóquio",
	"Cairo: Kairo, El Cairo, Le Caire, Il Cairo",
	"Mexico City: Mexiko-Stadt, Ciudad de México, Città del Messico, Cidade do México",
	"Geneva: Genf, Ginebra, Genève, Ginevra, Genebra",
	"Zurich: Zürich, Zúrich, Zurigo, Zurique",
	"Florence: Florenz, Florencia, Firenze, Florença",
	"Venice: Venedig, Venecia, Venise, Venezia, Veneza, Venetië",
	"Milan: Mailand, Milán, Milano, Milão",
	"Naples: Neapel, Nápoles, Napoli, Napels",
	"Turin: Turín, Torino",
	"Seville: Sevilla, Séville, Siviglia, Sevilha",
	"Antwerp: Antwerpen, Amberes, Anvers, Anversa, Antuérpia",
	"Dublin: Dublín, Dublino",
	"Edinburgh: Édimbourg, Edimburgo",
	"New Delhi: Neu-Delhi, Nueva Delhi, Nuova Delhi, Nova Deli",
	"Cape Town: Kapstadt, Ciudad del Cabo, Le Cap, Città del Capo, Cidade do Cabo, Kaapstad",
	"Rio de Janeiro: Río de Janeiro",
	// rivers
	"Danube: Donau, Danubio",
	"Rhine: Rhein, Rin, Rhin, Reno, Rijn",
	"Thames: Themse, Támesis, Tamise, Tamigi, Tâmisa",
	"Nile: Nilo, Nijl",
	"Amazon: Amazonas, Amazone, Rio delle Amazzoni, Amazonas-rivier",
	"Seine: Sena",
	// capitals and cities written the same in every language
	"Amsterdam", "Rotterdam", "Berlin", "Madrid", "Barcelona", "Oslo", "Helsinki", "Budapest", "Ottawa", "Toronto",
	"Vancouver", "Montreal", "Canberra", "Sydney", "Melbourne", "Wellington", "Washington", "New York", "Chicago",
	"Los Angeles", "San Francisco", "Boston", "Ankara", "Istanbul: Istambul, Estambul", "Dubai", "Delhi", "Mumbai",
	"Bangkok", "Seoul: Seúl, Séoul", "Nairobi", "Buenos Aires", "Santiago", "Lima", "Bogotá: Bogota", "Caracas",
	"Porto", "Lyon", "Marseille: Marsella, Marsiglia, Marselha", "Hamburg: Hamburgo, Hambourg, Amburgo", "Frankfurt: Fráncfort, Francfort, Francoforte",
	"Manchester", "Glasgow", "Liverpool", "Zagreb", "Ljubljana", "Bratislava", "Sofia", "Riga", "Tallinn", "Vilnius", "Luxembourg: Luxemburg, Luxemburgo, Lussemburgo",
	"Monaco", "Mont Blanc: Montblanc, Monte Bianco, Monte Blanco, Monte Branco",
	"Matterhorn: Cervino, Mont Cervin", "Mount Everest: Everest, Monte Everest",
	"Ebro", "Tagus: Tajo, Tejo, Tage", "Po", "Tiber: Tevere, Tíber, Tibre", "Loire", "Elbe: Elba", "Volga", "Arno", "Mississippi",
	// seas, oceans and continents
	"Pacific: Pazifik, Pacífico, Pacifique, Pacifico, Stille Oceaan, Grote Oceaan",
	"Atlantic: Atlantik, Atlántico, Atlantique, Atlantico, Atlântico, Atlantische Oceaan",
	"Indian Ocean: Indischer Ozean, Océano Índico, Océan Indien, Oceano Indiano, Oceano Índico, Indische Oceaan",
	"Arctic Ocean: Arktischer Ozean, Nordpolarmeer, Océano Ártico, Océan Arctique, Oceano Artico, Oceano Ártico, Noordelijke IJszee",
	"Mediterranean: Mittelmeer, Mediterráneo, Méditerranée, Mediterraneo, Mediterrâneo, Middellandse Zee",
	"North Sea: Nordsee, Mar del Norte, Mer du Nord, Mare del Nord, Mar do Norte, Noordzee",
	"Baltic Sea: Ostsee, Mar Báltico, Mer Baltique, Mar Baltico, Oostzee",
	"Europe: Europa",
	"Asia: Asien, Asie, Ásia, Azië",
	"Africa: Afrika, Afrique, África",
	"North America: Nordamerika, América del Norte, Amérique du Nord, America del Nord, América do Norte, Noord-Amerika",
	"South America: Südamerika, América del Sur, Amérique du Sud, America del Sud, América do Sul, Zuid-Amerika",
	"Antarctica: Antarktis, Antártida, Antarctique, Antartide",
	"Oceania: Ozeanien, Océanie, Oceanië",
	// planets
	"Mercury: Merkur, Mercurio, Mercure, Mercúrio, Mercurius",
	"Venus: Vénus",
	"Mars: Marte",
	"Jupiter: Júpiter, Giove",
	"Saturn: Saturno, Saturne, Saturnus",
	"Uranus: Urano",
	"Neptune: Neptun, Neptuno, Nettuno, Netuno, Neptunus",
	"Pluto: Plutón, Pluton, Plutone, Plutão",
}

// placeEnglish maps a folded place name to its English name.
var placeEnglish = map[string]string{}

func init() {
	for _, line := range placeLines {
		en, rest, _ := strings.Cut(line, ":")
		placeEnglish[fold(en)] = en
		for _, f := range strings.Split(rest, ",") {
			if f = strings.TrimSpace(f); f != "" {
				placeEnglish[fold(f)] = en
			}
		}
	}
}

// knownName reports a folded word or run of words that is a place or
// planet name of placeLines.
func knownName(folded string) bool {
	_, ok := placeEnglish[folded]
	return ok
}

// englishPlace returns the English name of a place name, or the name
// itself when it is not a known place.
func englishPlace(name string) string {
	if en, ok := placeEnglish[fold(name)]; ok {
		return en
	}
	return name
}
