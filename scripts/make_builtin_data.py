"""Write the built-in data of lens_heads (``lens_heads/data``), reproducibly.

Every fact list below was written by hand for this project; the templated tasks (letters,
capitalisation, sequences, "pick the X among three words") and the parallel corpus (composed
from per-language lexicons with programmatic agreement, word order, tokens and alignments) are
generated with ``random.Random(0)``. The data is released under CC0-1.0 (see
``lens_heads/data/LICENSE.md``).

Run from the repository root::

    python scripts/make_builtin_data.py
"""

from __future__ import annotations

import json
import random
import re
import string
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "lens_heads" / "data"


def pairs(text: str, width: int = 2) -> list[tuple[str, ...]]:
    """Entries separated by newlines or ``;``, fields by ``|``."""
    result = []
    for item in re.split(r"[;\n]", text):
        item = item.strip()
        if not item:
            continue
        fields = tuple(field.strip() for field in item.split("|"))
        if len(fields) != width or not all(fields):
            raise ValueError(f"bad entry {item!r}")
        result.append(fields)
    return result


def words(text: str) -> list[str]:
    """Whitespace-separated words, first occurrence kept."""
    return list(dict.fromkeys(text.split()))


# -- facts ------------------------------------------------------------------------------------
# Countries whose capital is disputed, split between cities, recently moved or equal to the
# country's own name are left out.
COUNTRY_CAPITAL = """
Afghanistan|Kabul; Albania|Tirana; Algeria|Algiers; Angola|Luanda; Antigua and Barbuda|Saint John's
Argentina|Buenos Aires; Armenia|Yerevan; Australia|Canberra; Austria|Vienna; Azerbaijan|Baku
Bahamas|Nassau; Bahrain|Manama; Bangladesh|Dhaka; Barbados|Bridgetown; Belarus|Minsk
Belgium|Brussels; Belize|Belmopan; Benin|Porto-Novo; Bhutan|Thimphu
Bosnia and Herzegovina|Sarajevo; Botswana|Gaborone; Brazil|Brasília; Brunei|Bandar Seri Begawan
Bulgaria|Sofia; Burkina Faso|Ouagadougou; Cambodia|Phnom Penh; Cameroon|Yaoundé; Canada|Ottawa
Cape Verde|Praia; Central African Republic|Bangui; Chad|N'Djamena; Chile|Santiago; China|Beijing
Colombia|Bogotá; Comoros|Moroni; Costa Rica|San José; Croatia|Zagreb; Cuba|Havana
Cyprus|Nicosia; Czech Republic|Prague; Democratic Republic of the Congo|Kinshasa
Republic of the Congo|Brazzaville; Denmark|Copenhagen; Dominica|Roseau
Dominican Republic|Santo Domingo; East Timor|Dili; Ecuador|Quito; Egypt|Cairo
El Salvador|San Salvador; Equatorial Guinea|Malabo; Eritrea|Asmara; Estonia|Tallinn
Ethiopia|Addis Ababa; Fiji|Suva; Finland|Helsinki; France|Paris; Gabon|Libreville
Gambia|Banjul; Georgia|Tbilisi; Germany|Berlin; Ghana|Accra; Greece|Athens
Grenada|Saint George's; Guatemala|Guatemala City; Guinea|Conakry; Guinea-Bissau|Bissau
Guyana|Georgetown; Haiti|Port-au-Prince; Honduras|Tegucigalpa; Hungary|Budapest
Iceland|Reykjavik; India|New Delhi; Indonesia|Jakarta; Iran|Tehran; Iraq|Baghdad
Ireland|Dublin; Italy|Rome; Jamaica|Kingston; Japan|Tokyo; Jordan|Amman; Kazakhstan|Astana
Kenya|Nairobi; Kiribati|Tarawa; Kuwait|Kuwait City; Kyrgyzstan|Bishkek; Laos|Vientiane
Latvia|Riga; Lebanon|Beirut; Lesotho|Maseru; Liberia|Monrovia; Libya|Tripoli
Liechtenstein|Vaduz; Lithuania|Vilnius; Madagascar|Antananarivo; Malawi|Lilongwe
Malaysia|Kuala Lumpur; Maldives|Malé; Mali|Bamako; Malta|Valletta; Marshall Islands|Majuro
Mauritania|Nouakchott; Mauritius|Port Louis; Mexico|Mexico City; Micronesia|Palikir
Moldova|Chisinau; Mongolia|Ulaanbaatar; Montenegro|Podgorica; Morocco|Rabat
Mozambique|Maputo; Myanmar|Naypyidaw; Namibia|Windhoek; Nepal|Kathmandu
Netherlands|Amsterdam; New Zealand|Wellington; Nicaragua|Managua; Niger|Niamey
Nigeria|Abuja; North Korea|Pyongyang; North Macedonia|Skopje; Norway|Oslo; Oman|Muscat
Pakistan|Islamabad; Palau|Ngerulmud; Panama|Panama City; Papua New Guinea|Port Moresby
Paraguay|Asunción; Peru|Lima; Philippines|Manila; Poland|Warsaw; Portugal|Lisbon
Qatar|Doha; Romania|Bucharest; Russia|Moscow; Rwanda|Kigali
Saint Kitts and Nevis|Basseterre; Saint Lucia|Castries
Saint Vincent and the Grenadines|Kingstown; Samoa|Apia; Saudi Arabia|Riyadh
Senegal|Dakar; Serbia|Belgrade; Seychelles|Victoria; Sierra Leone|Freetown
Slovakia|Bratislava; Slovenia|Ljubljana; Solomon Islands|Honiara; Somalia|Mogadishu
South Korea|Seoul; South Sudan|Juba; Spain|Madrid; Sudan|Khartoum; Suriname|Paramaribo
Sweden|Stockholm; Switzerland|Bern; Syria|Damascus; Taiwan|Taipei; Tajikistan|Dushanbe
Tanzania|Dodoma; Thailand|Bangkok; Togo|Lomé; Tonga|Nuku'alofa
Trinidad and Tobago|Port of Spain; Tunisia|Tunis; Turkey|Ankara; Turkmenistan|Ashgabat
Tuvalu|Funafuti; Uganda|Kampala; Ukraine|Kyiv; United Arab Emirates|Abu Dhabi
United Kingdom|London; United States|Washington; Uruguay|Montevideo; Uzbekistan|Tashkent
Vanuatu|Port Vila; Venezuela|Caracas; Vietnam|Hanoi; Yemen|Sanaa; Zambia|Lusaka
Zimbabwe|Harare
"""

# The short name of the currency, capitalised as a model starts an answer ("Yen" is contained
# in "Yen" and "Japanese Yen"). Countries whose currency changed recently or is in flux are
# left out.
COUNTRY_CURRENCY = """
Afghanistan|Afghani; Albania|Lek; Algeria|Dinar; Angola|Kwanza; Argentina|Peso; Armenia|Dram
Australia|Dollar; Austria|Euro; Azerbaijan|Manat; Bahamas|Dollar; Bahrain|Dinar
Bangladesh|Taka; Barbados|Dollar; Belarus|Ruble; Belgium|Euro; Belize|Dollar; Benin|Franc
Bhutan|Ngultrum; Bolivia|Boliviano; Bosnia and Herzegovina|Mark; Botswana|Pula; Brazil|Real
Brunei|Dollar; Burkina Faso|Franc; Burundi|Franc; Cambodia|Riel; Cameroon|Franc
Canada|Dollar; Cape Verde|Escudo; Central African Republic|Franc; Chad|Franc; Chile|Peso
China|Yuan; Colombia|Peso; Comoros|Franc; Costa Rica|Colón; Croatia|Euro; Cuba|Peso
Cyprus|Euro; Czech Republic|Koruna; Democratic Republic of the Congo|Franc; Denmark|Krone
Djibouti|Franc; Dominican Republic|Peso; East Timor|Dollar; Ecuador|Dollar; Egypt|Pound
El Salvador|Dollar; Equatorial Guinea|Franc; Eritrea|Nakfa; Estonia|Euro; Eswatini|Lilangeni
Ethiopia|Birr; Fiji|Dollar; Finland|Euro; France|Euro; Gabon|Franc; Gambia|Dalasi
Georgia|Lari; Germany|Euro; Ghana|Cedi; Greece|Euro; Grenada|Dollar; Guatemala|Quetzal
Guinea|Franc; Guyana|Dollar; Haiti|Gourde; Honduras|Lempira; Hungary|Forint; India|Rupee
Indonesia|Rupiah; Iran|Rial; Iraq|Dinar; Ireland|Euro; Israel|Shekel; Italy|Euro
Ivory Coast|Franc; Jamaica|Dollar; Japan|Yen; Jordan|Dinar; Kazakhstan|Tenge; Kenya|Shilling
Kiribati|Dollar; Kosovo|Euro; Kuwait|Dinar; Kyrgyzstan|Som; Laos|Kip; Latvia|Euro
Lebanon|Pound; Lesotho|Loti; Liberia|Dollar; Libya|Dinar; Lithuania|Euro; Luxembourg|Euro
Madagascar|Ariary; Malawi|Kwacha; Malaysia|Ringgit; Maldives|Rufiyaa; Mali|Franc; Malta|Euro
Marshall Islands|Dollar; Mauritania|Ouguiya; Mauritius|Rupee; Mexico|Peso; Micronesia|Dollar
Moldova|Leu; Monaco|Euro; Mongolia|Tugrik; Montenegro|Euro; Morocco|Dirham
Mozambique|Metical; Myanmar|Kyat; Namibia|Dollar; Nauru|Dollar; Nepal|Rupee
Netherlands|Euro; New Zealand|Dollar; Nicaragua|Córdoba; Niger|Franc; Nigeria|Naira
North Korea|Won; North Macedonia|Denar; Norway|Krone; Oman|Rial; Pakistan|Rupee
Palau|Dollar; Panama|Balboa; Papua New Guinea|Kina; Paraguay|Guarani; Peru|Sol
Philippines|Peso; Poland|Zloty; Portugal|Euro; Qatar|Riyal; Republic of the Congo|Franc
Romania|Leu; Russia|Ruble; Rwanda|Franc; Saint Kitts and Nevis|Dollar; Saint Lucia|Dollar
Saint Vincent and the Grenadines|Dollar; Samoa|Tala; San Marino|Euro; Saudi Arabia|Riyal
Senegal|Franc; Serbia|Dinar; Seychelles|Rupee; Sierra Leone|Leone; Singapore|Dollar
Slovakia|Euro; Slovenia|Euro; Solomon Islands|Dollar; Somalia|Shilling; South Africa|Rand
South Korea|Won; South Sudan|Pound; Spain|Euro; Sri Lanka|Rupee; Sudan|Pound
Suriname|Dollar; Sweden|Krona; Switzerland|Franc; Syria|Pound; Taiwan|Dollar
Tajikistan|Somoni; Tanzania|Shilling; Thailand|Baht; Togo|Franc; Trinidad and Tobago|Dollar
Tunisia|Dinar; Turkey|Lira; Turkmenistan|Manat; Tuvalu|Dollar; Uganda|Shilling
Ukraine|Hryvnia; United Arab Emirates|Dirham; United Kingdom|Pound; United States|Dollar
Uruguay|Peso; Uzbekistan|Som; Vanuatu|Vatu; Vatican City|Euro; Venezuela|Bolívar
Vietnam|Dong; Yemen|Rial; Zambia|Kwacha
"""

COMMON_WORDS = """
able about above accept across act add afraid after again age agree air all allow almost alone
along always among angry animal answer apple area arm army around arrive art ask aunt autumn
baby back bad bag ball bank basket bath beach bear beautiful because become bed bee before begin
behind bell belt bench best better between big bird birthday black blanket blood blue board boat
body bone book border bottle bottom box boy brain branch brave bread break breakfast bridge
bright bring brother brown brush build burn bus busy butter button buy cake call calm camera camp
candle candy cap captain car card care carpet carry castle cat catch chair chalk change cheap
cheese chicken child chin choose church circle city class clean clever climb clock close cloth
cloud coat coffee cold color come cook cookie corner cotton count country cousin cover cow crowd
cry cup curtain cut dance danger dark daughter day dear deep desk dinner dirty doctor dog doll
door dream dress drink drive drop dry duck dust eagle early earth east easy eat egg empty enemy
engine enjoy enough evening every eye face fact fair fall family famous farm fast father feather
feel field fight find finger finish fire fish flag floor flower fly follow food foot forest
forget fork free fresh friend frog fruit full funny game garden gate gentle ghost gift girl give
glass glove goat gold good grass great green ground group grow guess hair half hammer hand happy
hard hat head heart heavy help hill hole holiday home honey hope horse hot hour house hungry ice
idea island jacket jam job join juice jump jungle key kind king kitchen kite knee knife ladder
lake lamp large laugh leaf learn leg lemon letter library light lion listen little long lucky
lunch machine magic map market milk minute mirror money monkey month moon morning mother mountain
mouse mouth music name narrow nature near neck needle nest never night noise north nose number
ocean office old onion open orange paint paper parent park party pencil people pepper piano
picture pillow pink pizza plant plate pocket pond poor potato pretty prince purple queen question
quiet rabbit rain read red rice river road rock roof room rope round ruler run sad salt sand
school sea season seed shadow sheep shell ship shirt shoe shop short silver sing sister sky sleep
slow small smile snake snow soap sock soft soup south space spoon spring square star stone storm
story street strong sugar summer sun sweet table tail teacher tent thin tiger toast today tomato
tooth towel tower town toy train tree truck turtle umbrella uncle under valley village voice
wall warm watch water weather week west wheel white wind window winter wolf wood world yellow
young zebra
"""

PRESENT_PAST = """
go|went; have|had; do|did; say|said; get|got; make|made; know|knew; think|thought; take|took
see|saw; come|came; want|wanted; look|looked; use|used; find|found; give|gave; tell|told
work|worked; call|called; try|tried; ask|asked; need|needed; feel|felt; become|became
leave|left; put|put; mean|meant; keep|kept; let|let; begin|began; seem|seemed; help|helped
talk|talked; turn|turned; start|started; show|showed; hear|heard; play|played; run|ran
move|moved; like|liked; live|lived; believe|believed; hold|held; bring|brought
happen|happened; write|wrote; sit|sat; stand|stood; lose|lost; pay|paid; meet|met
include|included; continue|continued; set|set; learn|learned; change|changed; lead|led
understand|understood; watch|watched; follow|followed; stop|stopped; create|created
speak|spoke; read|read; spend|spent; grow|grew; open|opened; walk|walked; win|won
teach|taught; offer|offered; remember|remembered; consider|considered; appear|appeared
buy|bought; serve|served; die|died; send|sent; build|built; stay|stayed; fall|fell; cut|cut
reach|reached; kill|killed; raise|raised; pass|passed; sell|sold; decide|decided
return|returned; explain|explained; hope|hoped; develop|developed; carry|carried
break|broke; receive|received; agree|agreed; support|supported; hit|hit; produce|produced
eat|ate; cover|covered; catch|caught; draw|drew; choose|chose; wear|wore; drive|drove
fly|flew; swim|swam; sing|sang; drink|drank; sleep|slept; forget|forgot; forgive|forgave
freeze|froze; hide|hid; ride|rode; rise|rose; shake|shook; shoot|shot; steal|stole
sting|stung; strike|struck; swear|swore; sweep|swept; swing|swung; tear|tore; throw|threw
wake|woke; weep|wept; bite|bit; blow|blew; dig|dug; feed|fed; fight|fought; lay|laid
lend|lent; seek|sought; sink|sank; slide|slid; spin|spun; split|split; spread|spread
bend|bent; bet|bet; bleed|bled; breed|bred; burst|burst; cost|cost; creep|crept; deal|dealt
hurt|hurt; quit|quit; shut|shut; bind|bound; grind|ground; cling|clung; fling|flung
cook|cooked; clean|cleaned; dance|danced; jump|jumped; laugh|laughed; cry|cried
smile|smiled; study|studied; plan|planned; shop|shopped; drop|dropped; hug|hugged
admit|admitted; prefer|preferred; visit|visited; listen|listened; answer|answered
arrive|arrived; close|closed; climb|climbed; wash|washed; kiss|kissed; push|pushed
pull|pulled; fill|filled; paint|painted; wait|waited; wish|wished; enjoy|enjoyed
marry|married; worry|worried; hurry|hurried; copy|copied; reply|replied; obey|obeyed
destroy|destroyed; order|ordered; enter|entered; allow|allowed; invite|invited
describe|described; prepare|prepared; touch|touched; love|loved; hate|hated
knock|knocked; fix|fixed; mix|mixed; relax|relaxed; guess|guessed; miss|missed
kick|kicked; pick|picked; point|pointed; count|counted; shout|shouted
whisper|whispered; borrow|borrowed; deliver|delivered; collect|collected; check|checked
fold|folded; boil|boiled; bake|baked; taste|tasted; lift|lifted; save|saved; share|shared
thank|thanked; trust|trusted; warn|warned; wonder|wondered; yell|yelled; bury|buried
rob|robbed; beg|begged; stir|stirred; chat|chatted; grab|grabbed; jog|jogged; nod|nodded
"""

SINGULAR_PLURAL = """
child|children; man|men; woman|women; mouse|mice; goose|geese; foot|feet; tooth|teeth
person|people; ox|oxen; knife|knives; wife|wives; leaf|leaves; life|lives; wolf|wolves
half|halves; shelf|shelves; loaf|loaves; thief|thieves; calf|calves; box|boxes; bus|buses
glass|glasses; dish|dishes; church|churches; watch|watches; fox|foxes; kiss|kisses
brush|brushes; potato|potatoes; tomato|tomatoes; hero|heroes; echo|echoes; baby|babies
city|cities; lady|ladies; party|parties; story|stories; country|countries; family|families
body|bodies; puppy|puppies; cherry|cherries; berry|berries; day|days; key|keys; boy|boys
toy|toys; monkey|monkeys; donkey|donkeys; valley|valleys; piano|pianos; photo|photos
radio|radios; video|videos; zoo|zoos; kangaroo|kangaroos; crisis|crises; analysis|analyses
thesis|theses; phenomenon|phenomena; criterion|criteria; beach|beaches; bench|benches
match|matches; lunch|lunches; peach|peaches; class|classes; dress|dresses
address|addresses; tax|taxes; wish|wishes; bush|bushes; apple|apples; banana|bananas
book|books; car|cars; chair|chairs; table|tables; house|houses; tree|trees; bird|birds
flower|flowers; river|rivers; mountain|mountains; pen|pens; pencil|pencils; cup|cups
plate|plates; spoon|spoons; fork|forks; door|doors; window|windows; bed|beds; lamp|lamps
shoe|shoes; shirt|shirts; hat|hats; coat|coats; sock|socks; ring|rings; bag|bags
bottle|bottles; computer|computers; phone|phones; camera|cameras; clock|clocks; desk|desks
teacher|teachers; student|students; doctor|doctors; friend|friends; brother|brothers
sister|sisters; mother|mothers; father|fathers; king|kings; queen|queens; girl|girls
horse|horses; cow|cows; pig|pigs; duck|ducks; rabbit|rabbits; lion|lions; tiger|tigers
elephant|elephants; snake|snakes; frog|frogs; bee|bees; ant|ants; spider|spiders; egg|eggs
cake|cakes; cookie|cookies; orange|oranges; lemon|lemons; pear|pears; grape|grapes
carrot|carrots; onion|onions; road|roads; street|streets; bridge|bridges; park|parks
garden|gardens; school|schools; shop|shops; bank|banks; farm|farms; ship|ships; boat|boats
train|trains; plane|planes; bike|bikes; truck|trucks; star|stars; planet|planets
cloud|clouds; rock|rocks; stone|stones; lake|lakes; island|islands; forest|forests
field|fields; hill|hills; song|songs; game|games; word|words; letter|letters; name|names
idea|ideas; question|questions; answer|answers; problem|problems; minute|minutes
hour|hours; week|weeks; month|months; year|years; room|rooms; kitchen|kitchens; wall|walls
floor|floors; roof|roofs; cat|cats; dog|dogs; hand|hands; eye|eyes; ear|ears; nose|noses
arm|arms; leg|legs; finger|fingers; head|heads; heart|hearts; bone|bones; nurse|nurses
farmer|farmers; singer|singers; painter|painters; writer|writers; player|players
driver|drivers; pilot|pilots; soldier|soldiers; artist|artists; baker|bakers
dancer|dancers; ticket|tickets; coin|coins; gift|gifts; map|maps; card|cards
"""

# "a|b" one direction; "a<>b" both directions.
ANTONYM = """
hot<>cold; big<>small; up<>down; in<>out; open<>closed; good<>bad; happy<>sad; fast<>slow
day<>night; black<>white; rich<>poor; strong<>weak; easy<>difficult; early<>late
full<>empty; wet<>dry; clean<>dirty; thick<>thin; wide<>narrow; deep<>shallow; high<>low
loud<>quiet; cheap<>expensive; true<>false; win<>lose; buy<>sell; give<>take; push<>pull
begin<>end; enter<>exit; accept<>reject; love<>hate; laugh<>cry; remember<>forget
teach<>learn; sit<>stand; above<>below; before<>after; inside<>outside; top<>bottom
front<>back; first<>last; north<>south; east<>west; always<>never; everything<>nothing
more<>less; many<>few; maximum<>minimum; male<>female; husband<>wife; king<>queen
boy<>girl; man<>woman; brother<>sister; father<>mother; son<>daughter; friend<>enemy
war<>peace; life<>death; alive<>dead; success<>failure; victory<>defeat; positive<>negative
major<>minor; increase<>decrease; add<>subtract; multiply<>divide; import<>export
include<>exclude; inhale<>exhale; ascend<>descend; float<>sink; lend<>borrow
sunrise<>sunset; summer<>winter; near<>far; here<>there; come<>go; yes<>no; on<>off
visible<>invisible; possible<>impossible; legal<>illegal; polite<>rude; honest<>dishonest
patient<>impatient; generous<>stingy; brave<>cowardly; wise<>foolish; beautiful<>ugly
smooth<>rough; sharp<>blunt; tight<>loose; safe<>dangerous; awake<>asleep
present<>absent; public<>private; ancient<>modern; arrival<>departure; natural<>artificial
permanent<>temporary; rural<>urban; vertical<>horizontal; internal<>external
plural<>singular; active<>passive; odd<>even; hero<>villain; guilty<>innocent
agree<>disagree; like<>dislike; appear<>disappear; connect<>disconnect; lock<>unlock
pack<>unpack; forward<>backward; inner<>outer; upper<>lower; interior<>exterior
optimist<>pessimist; superior<>inferior; complex<>simple; rare<>common; same<>different
domestic<>foreign; attack<>defend; mortal<>immortal; pass<>fail; catch<>throw
morning<>evening; question|answer; young|old; new|old; soft|hard; tall|short; long|short
heavy|light; wrong|right; left|right; arrive|depart; entrance|exit; noisy|quiet; fat|thin
kind|cruel; smart|stupid; healthy|sick; sweet|sour; friendly|hostile; start|finish
"""

SYNONYM = """
big|large; small|little; happy|glad; sad|unhappy; fast|quick; smart|clever; begin|start
end|finish; buy|purchase; close|shut; angry|mad; rich|wealthy; beautiful|pretty
difficult|hard; easy|simple; large|big; little|small; quick|fast; start|begin; finish|end
shut|close; glad|happy; wealthy|rich; pretty|beautiful; simple|easy; afraid|scared
scared|afraid; car|automobile; automobile|car; couch|sofa; sofa|couch; present|gift
gift|present; shout|yell; yell|shout; talk|speak; speak|talk; stone|rock; rock|stone
street|road; road|street; child|kid; kid|child; correct|right; wrong|incorrect
incorrect|wrong; tired|sleepy; sleepy|tired; sick|ill; ill|sick; silent|quiet; quiet|silent
loud|noisy; noisy|loud; huge|enormous; enormous|huge; tiny|little; job|occupation
occupation|job; chef|cook; help|assist; assist|help; shop|store; store|shop; hide|conceal
conceal|hide; answer|reply; reply|answer; ask|inquire; rapid|fast; speedy|fast; cold|chilly
chilly|cold; smell|odor; odor|smell; fix|repair; repair|fix; gather|collect; collect|gather
choose|select; select|choose; brave|courageous; courageous|brave; jump|leap; leap|jump
damp|moist; moist|damp; cry|weep; weep|cry; mistake|error; error|mistake; thin|slim
slim|thin; evil|wicked; wicked|evil; unhappy|sad; stupid|foolish; foolish|stupid
funny|amusing; amusing|funny; strange|odd; odd|strange; weird|strange; trip|journey
journey|trip; middle|center; center|middle; enemy|foe; foe|enemy; aid|help; hurry|rush
rush|hurry; destroy|ruin; ruin|destroy; precise|exact; exact|precise; idea|notion
notion|idea; whole|entire; entire|whole; far|distant; distant|far; permit|allow
allow|permit; below|beneath; beneath|below; often|frequently; frequently|often
maybe|perhaps; perhaps|maybe; almost|nearly; nearly|almost; sure|certain; certain|sure
annoy|bother; bother|annoy; understand|comprehend; comprehend|understand; dirty|filthy
filthy|dirty; neat|tidy; tidy|neat; shy|timid; timid|shy; polite|courteous; rude|impolite
impolite|rude; famous|renowned; renowned|famous; garbage|trash; trash|garbage; movie|film
film|movie; autumn|fall; vacation|holiday; holiday|vacation; photo|picture; bunny|rabbit
sea|ocean; ocean|sea; cash|money; grin|smile; stop|halt; halt|stop; vanish|disappear
disappear|vanish; student|pupil; pupil|student; instructor|teacher; doctor|physician
physician|doctor; lawyer|attorney; attorney|lawyer; belly|stomach; stomach|belly
pants|trousers; trousers|pants; truck|lorry; lorry|truck; elevator|lift; baby|infant
infant|baby; nice|pleasant; pleasant|nice; terrible|awful; awful|terrible
excellent|superb; superb|excellent; gorgeous|beautiful; hate|detest; detest|hate
love|adore; adore|love; alike|similar; similar|alike; rapidly|quickly; quickly|rapidly
joy|happiness; happiness|joy; sorrow|sadness; sadness|sorrow; anger|rage; rage|anger
"""

# English | French | Spanish | German (the single most common translation; German nouns keep
# their capital letter). Words whose translation depends on the sense are left out.
TRANSLATIONS = """
dog|chien|perro|Hund; cat|chat|gato|Katze; house|maison|casa|Haus; water|eau|agua|Wasser
book|livre|libro|Buch; car|voiture|coche|Auto; tree|arbre|árbol|Baum; sun|soleil|sol|Sonne
moon|lune|luna|Mond; star|étoile|estrella|Stern; sea|mer|mar|Meer; river|rivière|río|Fluss
mountain|montagne|montaña|Berg; city|ville|ciudad|Stadt; country|pays|país|Land
school|école|escuela|Schule; teacher|professeur|profesor|Lehrer
student|étudiant|estudiante|Student; friend|ami|amigo|Freund; family|famille|familia|Familie
mother|mère|madre|Mutter; father|père|padre|Vater; brother|frère|hermano|Bruder
sister|sœur|hermana|Schwester; son|fils|hijo|Sohn; daughter|fille|hija|Tochter
child|enfant|niño|Kind; man|homme|hombre|Mann; woman|femme|mujer|Frau
boy|garçon|chico|Junge; girl|fille|chica|Mädchen; baby|bébé|bebé|Baby; king|roi|rey|König
queen|reine|reina|Königin; bread|pain|pan|Brot; milk|lait|leche|Milch
cheese|fromage|queso|Käse; egg|œuf|huevo|Ei; apple|pomme|manzana|Apfel
meat|viande|carne|Fleisch; wine|vin|vino|Wein; beer|bière|cerveza|Bier
coffee|café|café|Kaffee; tea|thé|té|Tee; sugar|sucre|azúcar|Zucker; salt|sel|sal|Salz
rice|riz|arroz|Reis; soup|soupe|sopa|Suppe; table|table|mesa|Tisch; chair|chaise|silla|Stuhl
bed|lit|cama|Bett; door|porte|puerta|Tür; window|fenêtre|ventana|Fenster
kitchen|cuisine|cocina|Küche; garden|jardin|jardín|Garten; street|rue|calle|Straße
bridge|pont|puente|Brücke; church|église|iglesia|Kirche; hospital|hôpital|hospital|Krankenhaus
bank|banque|banco|Bank; money|argent|dinero|Geld; time|temps|tiempo|Zeit; day|jour|día|Tag
night|nuit|noche|Nacht; morning|matin|mañana|Morgen; week|semaine|semana|Woche
month|mois|mes|Monat; year|année|año|Jahr; hour|heure|hora|Stunde
minute|minute|minuto|Minute; word|mot|palabra|Wort; language|langue|idioma|Sprache
name|nom|nombre|Name; head|tête|cabeza|Kopf; hand|main|mano|Hand; foot|pied|pie|Fuß
eye|œil|ojo|Auge; ear|oreille|oreja|Ohr; mouth|bouche|boca|Mund; nose|nez|nariz|Nase
face|visage|cara|Gesicht; heart|cœur|corazón|Herz; arm|bras|brazo|Arm
leg|jambe|pierna|Bein; tooth|dent|diente|Zahn; blood|sang|sangre|Blut
bird|oiseau|pájaro|Vogel; horse|cheval|caballo|Pferd; cow|vache|vaca|Kuh
pig|cochon|cerdo|Schwein; sheep|mouton|oveja|Schaf; mouse|souris|ratón|Maus
rabbit|lapin|conejo|Kaninchen; bear|ours|oso|Bär; wolf|loup|lobo|Wolf; lion|lion|león|Löwe
snake|serpent|serpiente|Schlange; duck|canard|pato|Ente; flower|fleur|flor|Blume
grass|herbe|hierba|Gras; forest|forêt|bosque|Wald; rain|pluie|lluvia|Regen
snow|neige|nieve|Schnee; wind|vent|viento|Wind; fire|feu|fuego|Feuer
earth|terre|tierra|Erde; sky|ciel|cielo|Himmel; cloud|nuage|nube|Wolke
stone|pierre|piedra|Stein; island|île|isla|Insel; beach|plage|playa|Strand
lake|lac|lago|See; village|village|pueblo|Dorf; market|marché|mercado|Markt
key|clé|llave|Schlüssel; newspaper|journal|periódico|Zeitung; pen|stylo|bolígrafo|Stift
paper|papier|papel|Papier; song|chanson|canción|Lied; music|musique|música|Musik
game|jeu|juego|Spiel; shoe|chaussure|zapato|Schuh; shirt|chemise|camisa|Hemd
hat|chapeau|sombrero|Hut; dress|robe|vestido|Kleid; clock|horloge|reloj|Uhr
cup|tasse|taza|Tasse; plate|assiette|plato|Teller; knife|couteau|cuchillo|Messer
spoon|cuillère|cuchara|Löffel; fork|fourchette|tenedor|Gabel
bottle|bouteille|botella|Flasche; train|train|tren|Zug; plane|avion|avión|Flugzeug
boat|bateau|barco|Boot; bicycle|vélo|bicicleta|Fahrrad
airport|aéroport|aeropuerto|Flughafen; doctor|médecin|médico|Arzt; life|vie|vida|Leben
death|mort|muerte|Tod; war|guerre|guerra|Krieg; peace|paix|paz|Frieden
world|monde|mundo|Welt; wall|mur|pared|Wand; roof|toit|tejado|Dach
summer|été|verano|Sommer; winter|hiver|invierno|Winter; spring|printemps|primavera|Frühling
autumn|automne|otoño|Herbst; Monday|lundi|lunes|Montag; Tuesday|mardi|martes|Dienstag
Wednesday|mercredi|miércoles|Mittwoch; Thursday|jeudi|jueves|Donnerstag
Friday|vendredi|viernes|Freitag; Saturday|samedi|sábado|Samstag
Sunday|dimanche|domingo|Sonntag; January|janvier|enero|Januar
February|février|febrero|Februar; March|mars|marzo|März; April|avril|abril|April
May|mai|mayo|Mai; June|juin|junio|Juni; July|juillet|julio|Juli; August|août|agosto|August
September|septembre|septiembre|September; October|octobre|octubre|Oktober
November|novembre|noviembre|November; December|décembre|diciembre|Dezember
one|un|uno|eins; two|deux|dos|zwei; three|trois|tres|drei; four|quatre|cuatro|vier
five|cinq|cinco|fünf; six|six|seis|sechs; seven|sept|siete|sieben; eight|huit|ocho|acht
nine|neuf|nueve|neun; ten|dix|diez|zehn; hundred|cent|cien|hundert
thousand|mille|mil|tausend; red|rouge|rojo|rot; blue|bleu|azul|blau; green|vert|verde|grün
yellow|jaune|amarillo|gelb; black|noir|negro|schwarz; white|blanc|blanco|weiß
big|grand|grande|groß; small|petit|pequeño|klein; new|nouveau|nuevo|neu
old|vieux|viejo|alt; young|jeune|joven|jung; good|bon|bueno|gut; bad|mauvais|malo|schlecht
beautiful|beau|hermoso|schön; hot|chaud|caliente|heiß; cold|froid|frío|kalt
happy|heureux|feliz|glücklich; sad|triste|triste|traurig; long|long|largo|lang
short|court|corto|kurz; fast|rapide|rápido|schnell; slow|lent|lento|langsam
easy|facile|fácil|einfach; difficult|difficile|difícil|schwierig; rich|riche|rico|reich
poor|pauvre|pobre|arm; strong|fort|fuerte|stark; weak|faible|débil|schwach
full|plein|lleno|voll; empty|vide|vacío|leer; clean|propre|limpio|sauber
dirty|sale|sucio|schmutzig; heavy|lourd|pesado|schwer; expensive|cher|caro|teuer
dark|sombre|oscuro|dunkel; early|tôt|temprano|früh; late|tard|tarde|spät
true|vrai|verdadero|wahr; dry|sec|seco|trocken; wet|mouillé|mojado|nass
sweet|sucré|dulce|süß; eat|manger|comer|essen; drink|boire|beber|trinken
sleep|dormir|dormir|schlafen; speak|parler|hablar|sprechen; read|lire|leer|lesen
write|écrire|escribir|schreiben; sing|chanter|cantar|singen; dance|danser|bailar|tanzen
swim|nager|nadar|schwimmen; run|courir|correr|laufen; go|aller|ir|gehen
come|venir|venir|kommen; see|voir|ver|sehen; hear|entendre|oír|hören; give|donner|dar|geben
take|prendre|tomar|nehmen; buy|acheter|comprar|kaufen; sell|vendre|vender|verkaufen
open|ouvrir|abrir|öffnen; close|fermer|cerrar|schließen; learn|apprendre|aprender|lernen
understand|comprendre|entender|verstehen; help|aider|ayudar|helfen
wait|attendre|esperar|warten; find|trouver|encontrar|finden; think|penser|pensar|denken
play|jouer|jugar|spielen; cook|cuisiner|cocinar|kochen; live|vivre|vivir|leben
die|mourir|morir|sterben; travel|voyager|viajar|reisen; ask|demander|preguntar|fragen
begin|commencer|empezar|beginnen; forget|oublier|olvidar|vergessen; laugh|rire|reír|lachen
cry|pleurer|llorar|weinen; fly|voler|volar|fliegen; build|construire|construir|bauen
draw|dessiner|dibujar|zeichnen; pay|payer|pagar|bezahlen; send|envoyer|enviar|schicken
"""

SENTIMENT_POSITIVE = """
I loved every minute of this wonderful film.
The food here is delicious and the staff are friendly.
What a beautiful day for a walk in the park.
She was thrilled to get the job offer.
This is the best pizza I have ever eaten.
Our holiday by the sea was absolutely perfect.
The children had a great time at the party.
I am so proud of my daughter's results.
The new update makes the app much faster.
He gave a brilliant and inspiring speech.
The hotel room was clean, quiet and comfortable.
I highly recommend this book to everyone.
The concert last night was simply amazing.
My new shoes are very comfortable.
We enjoyed a lovely dinner with old friends.
The teacher explained everything clearly and patiently.
This little cafe makes the best coffee in town.
I feel wonderful after a good night's sleep.
The garden looks gorgeous in the spring.
Thank you so much for your kind help.
The team played brilliantly and won the final.
The museum was fascinating and full of surprises.
Her smile always makes my day better.
The service was fast and very professional.
I am really happy with my new laptop.
The view from the top was breathtaking.
This soup is warm, tasty and comforting.
Everyone at the wedding was joyful and relaxed.
The kids were delighted with their presents.
Working with this team is a real pleasure.
The puppy is adorable and very playful.
The show was funny from beginning to end.
I finally passed my driving test today.
The flowers you sent are absolutely lovely.
This phone has a fantastic camera.
The doctor was gentle and reassuring.
We had a peaceful and relaxing weekend.
The train arrived early and the ride was smooth.
Our neighbours are kind and always helpful.
The cake you baked was heavenly.
"""

SENTIMENT_NEGATIVE = """
I hated every minute of this boring film.
The food was cold and the waiter was rude.
What a miserable day, it rained nonstop.
She was upset when she lost her job.
This is the worst pizza I have ever eaten.
Our holiday was ruined by the awful weather.
The children were bored and cranky at the party.
I am very disappointed with these results.
The new update made the app slow and buggy.
He gave a dull and confusing speech.
The hotel room was dirty, noisy and cramped.
I would not recommend this book to anyone.
The concert last night was a total mess.
My new shoes hurt my feet terribly.
We had an unpleasant dinner full of arguments.
The teacher was impatient and explained nothing.
This cafe serves bitter and overpriced coffee.
I feel terrible after another sleepless night.
The garden looks dead and neglected.
Nobody helped me and I felt completely alone.
The team played poorly and lost badly.
The museum was dull and badly organised.
His constant complaining ruins my whole day.
The service was slow and very unprofessional.
I am really unhappy with my new laptop.
The view was blocked by an ugly building.
This soup is salty, greasy and cold.
Everyone at the meeting was tense and angry.
The kids cried because their toys broke.
Working with this team is a constant headache.
The dog barked all night and kept us awake.
The show was painfully unfunny and far too long.
I failed my driving test again today.
The flowers arrived wilted and half dead.
This phone has a terrible battery.
The doctor was cold and dismissive.
We had a stressful and exhausting weekend.
The train was late and horribly crowded.
Our neighbours are loud and very rude.
The cake you bought was stale and dry.
"""

SENTIMENT_SUBJECTS = """
The movie; This book; The hotel; Our dinner; The concert; The new phone; This restaurant
The service; The trip; The game; The show; The class; The party; The museum tour
The food; The music; The first episode; This laptop; The flight; The play
"""

SENTIMENT_PREDICATES = {
    "positive": [
        "was absolutely wonderful",
        "exceeded all my expectations",
        "made me really happy",
        "was a real delight",
        "was even better than I hoped",
        "was fantastic from start to finish",
        "left me smiling all day",
        "was truly excellent",
        "was a pleasant surprise",
        "was lovely in every way",
    ],
    "negative": [
        "was a complete disaster",
        "was a total waste of time",
        "made me really angry",
        "was even worse than I feared",
        "was boring from start to finish",
        "left me feeling miserable",
        "was truly awful",
        "was a huge disappointment",
        "was terrible in every way",
        "ruined my whole evening",
    ],
}

FRUITS = words("""
apple banana orange pear peach plum cherry grape lemon lime mango pineapple strawberry
watermelon melon apricot blueberry raspberry coconut papaya fig pomegranate grapefruit
blackberry nectarine tangerine guava lychee cranberry
""")
ANIMALS = words("""
dog cat horse cow pig sheep goat lion tiger bear wolf fox rabbit mouse elephant giraffe zebra
monkey kangaroo deer camel donkey squirrel owl eagle duck chicken snake frog turtle shark whale
dolphin penguin bee spider crocodile panda koala parrot goose rat hamster leopard cheetah otter
beaver moose
""")
COLORS = words("""
red blue green yellow purple pink brown black white gray orange violet beige turquoise maroon
crimson indigo magenta cyan teal lavender scarlet
""")
OBJECTS = words("""
chair table hammer spoon bottle pencil lamp shoe cup book key bicycle clock umbrella phone knife
pillow ladder bucket mirror blanket wallet candle basket backpack door window plate fork camera
guitar helmet brick rope scissors sofa kettle towel hat ball brush coin envelope jar
""")
CONCEPTS = words("""
freedom justice love happiness honesty courage wisdom patience beauty truth peace fear hope
knowledge kindness friendship loyalty anger jealousy democracy faith curiosity pride trust luck
success danger sadness joy respect creativity ambition equality mercy humor
""")


# -- word tasks -------------------------------------------------------------------------------
def examples(items) -> list[dict[str, str]]:
    """``{"input", "output"}`` dicts; a repeated input keeps its first answer."""
    seen: dict[str, str] = {}
    for source, answer in items:
        if source in seen:
            if seen[source] != answer:
                raise ValueError(f"conflicting answers for {source!r}")
            continue
        seen[source] = answer
    return [{"input": source, "output": answer} for source, answer in seen.items()]


def shuffled(items: list, rng: random.Random) -> list:
    items = list(items)
    rng.shuffle(items)
    return items


NUMBER_WORDS = words("""
zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
sixteen seventeen eighteen nineteen twenty
""")
ORDINALS = words("""
first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth thirteenth
fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth twentieth
""")
WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
MONTHS = (
    "January February March April May June July August September October November December"
).split()


def roman(n: int) -> str:
    numerals = [(10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]
    text = ""
    for value, symbol in numerals:
        while n >= value:
            text += symbol
            n -= value
    return text


def sequences() -> list[tuple[list[str], bool]]:
    """Ordered sequences and whether they wrap around (weekdays, months)."""
    return [
        ([str(i) for i in range(81)], False),
        (NUMBER_WORDS, False),
        (list(string.ascii_lowercase), False),
        (list(string.ascii_uppercase), False),
        (WEEKDAYS, True),
        (MONTHS, True),
        ([roman(i) for i in range(1, 21)], False),
        (ORDINALS, False),
    ]


def neighbour_items(step: int) -> list[tuple[str, str]]:
    """``(item, next item)`` for step 1, ``(item, previous item)`` for step -1. Single-letter
    roman numerals (I, V, X) are not used as inputs, as they are also capital letters."""
    items = []
    single_letter_numerals = {"I", "V", "X"}
    for sequence, cyclic in sequences():
        is_roman = sequence[0] == "I"
        for index, item in enumerate(sequence):
            other = index + step
            if not 0 <= other < len(sequence):
                if not cyclic:
                    continue
                other %= len(sequence)
            if is_roman and item in single_letter_numerals:
                continue
            items.append((item, sequence[other]))
    return items


def three_word_items(
    targets: list[str], distractors: list[str], rng: random.Random, n: int = 200
) -> list[tuple[str, str]]:
    """``("a, b, c", target)`` with exactly one target word at a seeded position."""
    if set(targets) & set(distractors):
        raise ValueError(f"lists overlap: {set(targets) & set(distractors)}")
    items: dict[str, str] = {}
    order = []
    while len(items) < n:
        if not order:
            order = shuffled(targets, rng)
        target = order.pop()
        chosen = rng.sample(distractors, 2)
        chosen.insert(rng.randrange(3), target)
        items.setdefault(", ".join(chosen), target)
    return list(items.items())


def antonym_items() -> list[tuple[str, str]]:
    items = []
    for item in re.split(r"[;\n]", ANTONYM):
        item = item.strip()
        if not item:
            continue
        if "<>" in item:
            a, b = (part.strip() for part in item.split("<>"))
            items += [(a, b), (b, a)]
        else:
            a, b = (part.strip() for part in item.split("|"))
            items.append((a, b))
    return items


def sentiment_items(rng: random.Random) -> list[tuple[str, str]]:
    subjects = [s for (s,) in pairs(SENTIMENT_SUBJECTS, width=1)]
    result = []
    for label, text in (("positive", SENTIMENT_POSITIVE), ("negative", SENTIMENT_NEGATIVE)):
        sentences = [line.strip() for line in text.strip().splitlines()]
        combos = [f"{s} {p}." for s in subjects for p in SENTIMENT_PREDICATES[label]]
        sentences += rng.sample(combos, 60)
        result += [(sentence, label) for sentence in sentences]
    return shuffled(result, rng)


def word_tasks(rng: random.Random) -> dict[str, list[dict[str, str]]]:
    common = words(COMMON_WORDS)
    translations = pairs(TRANSLATIONS, width=4)
    tasks = {
        "country-capital": examples(shuffled(pairs(COUNTRY_CAPITAL), rng)),
        "country-currency": examples(shuffled(pairs(COUNTRY_CURRENCY), rng)),
        "capitalize_first_letter": examples((w, w[0].upper()) for w in shuffled(common, rng)),
        "lowercase_last_letter": examples((w, w[-1].lower()) for w in shuffled(common, rng)),
        "capitalize": examples((w, w.capitalize()) for w in shuffled(common, rng)),
        "next_item": examples(shuffled(neighbour_items(1), rng)),
        "prev_item": examples(shuffled(neighbour_items(-1), rng)),
        "present-past": examples(shuffled(pairs(PRESENT_PAST), rng)),
        "singular-plural": examples(shuffled(pairs(SINGULAR_PLURAL), rng)),
        "antonym": examples(shuffled(antonym_items(), rng)),
        "synonym": examples(shuffled(pairs(SYNONYM), rng)),
    }
    for column, name in ((1, "english-french"), (2, "english-spanish"), (3, "english-german")):
        tasks[name] = examples((row[0], row[column]) for row in shuffled(translations, rng))
    tasks["sentiment"] = examples(sentiment_items(rng))
    tasks["fruit_v_animal_3"] = examples(three_word_items(FRUITS, ANIMALS, rng))
    tasks["color_v_animal_3"] = examples(three_word_items(COLORS, ANIMALS, rng))
    tasks["object_v_concept_3"] = examples(three_word_items(OBJECTS, CONCEPTS, rng))
    return tasks


REGISTRY = {
    "country-capital": (
        "Output the capital city of the given country.",
        "contains",
        "Country -> its capital city (hand-written facts).",
    ),
    "country-currency": (
        "Output the name of the currency used in the given country.",
        "contains",
        "Country -> the short name of its currency, e.g. Japan -> Yen (hand-written facts).",
    ),
    "capitalize_first_letter": (
        "Output the first letter of the given word in uppercase.",
        "startswith",
        "Lowercase word -> its first letter, capitalized (apple -> A).",
    ),
    "lowercase_last_letter": (
        "Output the last letter of the given word in lowercase.",
        "startswith",
        "Word -> its last letter, lowercase (apple -> e).",
    ),
    "capitalize": (
        "Capitalize the first letter of the given word.",
        "startswith",
        "Lowercase word -> the word with a capital first letter (apple -> Apple).",
    ),
    "next_item": (
        "Output the item that comes right after the given one in its sequence.",
        "startswith",
        "Next item of a sequence: numbers, number words, letters, weekdays, months, roman "
        "numerals, ordinals (weekdays and months wrap around).",
    ),
    "prev_item": (
        "Output the item that comes right before the given one in its sequence.",
        "startswith",
        "Previous item of a sequence: numbers, number words, letters, weekdays, months, roman "
        "numerals, ordinals (weekdays and months wrap around).",
    ),
    "present-past": (
        "Output the simple past tense of the given verb.",
        "contains",
        "English verb -> its simple past form (regular and irregular verbs).",
    ),
    "singular-plural": (
        "Output the plural form of the given noun.",
        "contains",
        "English noun -> its plural (regular and irregular nouns).",
    ),
    "antonym": (
        "Output a word that means the opposite of the given word.",
        "contains",
        "English word -> its antonym.",
    ),
    "synonym": (
        "Output a word that means the same as the given word.",
        "contains",
        "English word -> a synonym.",
    ),
    "english-french": (
        "Translate the given English word into French.",
        "contains",
        "English word -> its most common French translation.",
    ),
    "english-spanish": (
        "Translate the given English word into Spanish.",
        "contains",
        "English word -> its most common Spanish translation.",
    ),
    "english-german": (
        "Translate the given English word into German.",
        "contains",
        "English word -> its most common German translation (nouns capitalized).",
    ),
    "sentiment": (
        "Classify the sentiment of the given sentence as positive or negative.",
        "contains",
        "Short English sentence -> positive or negative (balanced).",
    ),
    "fruit_v_animal_3": (
        "Output the fruit among the given words.",
        "startswith",
        "Three comma-separated words, one fruit and two animals -> the fruit.",
    ),
    "color_v_animal_3": (
        "Output the color among the given words.",
        "startswith",
        "Three comma-separated words, one color and two animals -> the color.",
    ),
    "object_v_concept_3": (
        "Output the concrete object among the given words.",
        "startswith",
        "Three comma-separated words, one concrete object and two abstract concepts -> the object.",
    ),
}


# -- parallel corpus --------------------------------------------------------------------------
# Each target sentence is built as a list of (token, English token indices it aligns to), so
# word order, agreement, tokens and gold alignments come from one place. European Spanish.
# Nouns: English | French, gender | Spanish, gender | German, gender | Chinese, classifier.
NOUNS = """
book|livre|m|libro|m|Buch|n|书|本; car|voiture|f|coche|m|Auto|n|车|辆
house|maison|f|casa|f|Haus|n|房子|栋; table|table|f|mesa|f|Tisch|m|桌子|张
chair|chaise|f|silla|f|Stuhl|m|椅子|把; bag|sac|m|bolso|m|Tasche|f|包|个
key|clé|f|llave|f|Schlüssel|m|钥匙|把; phone|téléphone|m|teléfono|m|Handy|n|手机|部
letter|lettre|f|carta|f|Brief|m|信|封; cup|tasse|f|taza|f|Tasse|f|杯子|个
bottle|bouteille|f|botella|f|Flasche|f|瓶子|个; box|boîte|f|caja|f|Schachtel|f|盒子|个
window|fenêtre|f|ventana|f|Fenster|n|窗户|扇; door|porte|f|puerta|f|Tür|f|门|扇
bed|lit|m|cama|f|Bett|n|床|张; pen|stylo|m|bolígrafo|m|Stift|m|笔|支
shirt|chemise|f|camisa|f|Hemd|n|衬衫|件; hat|chapeau|m|sombrero|m|Hut|m|帽子|顶
lamp|lampe|f|lámpara|f|Lampe|f|灯|盏; computer|ordinateur|m|ordenador|m|Computer|m|电脑|台
bicycle|vélo|m|bicicleta|f|Fahrrad|n|自行车|辆
umbrella|parapluie|m|paraguas|m|Regenschirm|m|伞|把
watch|montre|f|reloj|m|Uhr|f|手表|块; dress|robe|f|vestido|m|Kleid|n|裙子|条
apple|pomme|f|manzana|f|Apfel|m|苹果|个; cake|gâteau|m|pastel|m|Kuchen|m|蛋糕|块
orange|orange|f|naranja|f|Orange|f|橙子|个; egg|œuf|m|huevo|m|Ei|n|鸡蛋|个
newspaper|journal|m|periódico|m|Zeitung|f|报纸|份; plate|assiette|f|plato|m|Teller|m|盘子|个
cat|chat|m|gato|m|Katze|f|猫|只; dog|chien|m|perro|m|Hund|m|狗|只
bird|oiseau|m|pájaro|m|Vogel|m|鸟|只; horse|cheval|m|caballo|m|Pferd|n|马|匹
rabbit|lapin|m|conejo|m|Kaninchen|n|兔子|只; mouse|souris|f|ratón|m|Maus|f|老鼠|只
garden|jardin|m|jardín|m|Garten|m|花园|个; park|parc|m|parque|m|Park|m|公园|个
kitchen|cuisine|f|cocina|f|Küche|f|厨房|个
bedroom|chambre|f|dormitorio|m|Schlafzimmer|n|卧室|个
drawer|tiroir|m|cajón|m|Schublade|f|抽屉|个; sofa|canapé|m|sofá|m|Sofa|n|沙发|张
man|homme|m|hombre|m|Mann|m|男人|个; woman|femme|f|mujer|f|Frau|f|女人|个
boy|garçon|m|niño|m|Junge|m|男孩|个; girl|fille|f|niña|f|Mädchen|n|女孩|个
teacher|professeur|m|profesor|m|Lehrer|m|老师|个
student|étudiant|m|estudiante|m|Student|m|学生|个; doctor|médecin|m|médico|m|Arzt|m|医生|个
"""

# Mass nouns (no English article): English | French partitive | Spanish | German | Chinese.
MASS = """
water|de l'|eau|agua|Wasser|水; milk|du|lait|leche|Milch|牛奶; coffee|du|café|café|Kaffee|咖啡
tea|du|thé|té|Tee|茶; juice|du|jus|zumo|Saft|果汁; bread|du|pain|pan|Brot|面包
rice|du|riz|arroz|Reis|米饭; cheese|du|fromage|queso|Käse|奶酪
meat|de la|viande|carne|Fleisch|肉; fish|du|poisson|pescado|Fisch|鱼
"""

# English | French m, f | Spanish m, f | German | Chinese (colors take 是 ... 的).
ADJECTIVES = """
big|grand|grande|grande|grande|groß|大; small|petit|petite|pequeño|pequeña|klein|小
new|neuf|neuve|nuevo|nueva|neu|新; old|vieux|vieille|viejo|vieja|alt|旧
expensive|cher|chère|caro|cara|teuer|贵; beautiful|beau|belle|bonito|bonita|schön|漂亮
heavy|lourd|lourde|pesado|pesada|schwer|重; red|rouge|rouge|rojo|roja|rot|红色
white|blanc|blanche|blanco|blanca|weiß|白色; black|noir|noire|negro|negra|schwarz|黑色
green|vert|verte|verde|verde|grün|绿色; blue|bleu|bleue|azul|azul|blau|蓝色
"""
COLOR_WORDS = {"red", "white", "black", "green", "blue"}
HEAVY_THINGS = {"book", "table", "chair", "bag", "box", "computer", "bicycle", "bed"}

# Transitive verbs, 3rd person singular: English | French | Spanish | German | Chinese, and
# the objects each takes.
VERBS_3SG = {
    "reads": (("lit", "lee", "liest", "看"), "book letter newspaper"),
    "writes": (("écrit", "escribe", "schreibt", "写"), "letter"),
    "opens": (("ouvre", "abre", "öffnet", "打开"), "door window box bag bottle"),
    "closes": (("ferme", "cierra", "schließt", "关上"), "door window"),
    "buys": (
        ("achète", "compra", "kauft", "买"),
        "book car bicycle newspaper shirt dress hat watch lamp umbrella computer phone cake",
    ),
    "washes": (("lave", "lava", "wäscht", "洗"), "car cup shirt dress apple plate"),
    "carries": (("porte", "lleva", "trägt", "拿着"), "bag box bottle book umbrella"),
    "eats": (("mange", "come", "isst", "吃"), "apple cake orange egg"),
}
MASS_VERBS = {
    "drinks": (("boit", "bebe", "trinkt", "喝"), "water milk coffee tea juice"),
    "eats": (("mange", "come", "isst", "吃"), "bread rice cheese meat fish"),
}
PEOPLE = "man woman boy girl teacher student doctor".split()

# Plural subjects: English | French | Spanish article, noun | German | Chinese | kind.
PLURALS = """
children|enfants|Los|niños|Kinder|孩子们|child; girls|filles|Las|niñas|Mädchen|女孩们|child
students|étudiants|Los|estudiantes|Studenten|学生们|adult
women|femmes|Las|mujeres|Frauen|女人们|adult; men|hommes|Los|hombres|Männer|男人们|adult
dogs|chiens|Los|perros|Hunde|狗|pet; cats|chats|Los|gatos|Katzen|猫|pet
birds|oiseaux|Los|pájaros|Vögel|鸟|bird
"""
# Intransitive verbs, 3rd person plural: French, Spanish, German, Chinese tokens; who does it
# and where. Animals "fressen" in German and "吃东西" in Chinese.
VERBS_3PL = {
    "play": (("jouent", "juegan", "spielen", ["玩"]), "child pet", "garden park house"),
    "sleep": (
        ("dorment", "duermen", "schlafen", ["睡觉"]),
        "child adult pet bird",
        "house bedroom",
    ),
    "eat": (("mangent", "comen", "essen", ["吃饭"]), "child adult", "kitchen garden park"),
    "run": (("courent", "corren", "laufen", ["跑步"]), "child adult", "park garden"),
    "sing": (("chantent", "cantan", "singen", ["唱歌"]), "child adult bird", "garden park"),
    "read": (("lisent", "leen", "lesen", ["看书"]), "child adult", "garden park kitchen bedroom"),
    "work": (("travaillent", "trabajan", "arbeiten", ["工作"]), "adult", "garden kitchen"),
    "wait": (("attendent", "esperan", "warten", ["等"]), "child adult", "car kitchen park garden"),
}
ANIMAL_EAT = ("mangent", "comen", "fressen", ["吃", "东西"])
ANIMAL_PLACES = {  # (kind, verb) -> places; animals eat too
    ("pet", "play"): "garden house",
    ("pet", "sleep"): "house bedroom car",
    ("pet", "eat"): "garden house kitchen",
    ("bird", "sleep"): "garden",
    ("bird", "sing"): "garden park",
    ("bird", "eat"): "garden park",
}

# Where things are ("in the ..." / "on the ...").
IN_PLACES = {
    "cat": "garden park kitchen house bedroom car",
    "dog": "garden park kitchen house car",
    "bird": "garden park kitchen",
    "rabbit": "garden house box",
    "mouse": "kitchen house box drawer",
    "key": "bag drawer car box kitchen",
    "book": "bag bedroom car kitchen box",
    "phone": "bag drawer car bedroom kitchen",
    "pen": "bag drawer box",
    "letter": "bag drawer box",
    "watch": "drawer box bag bedroom",
    "umbrella": "car bag house",
    "cup": "kitchen bag car",
    "bottle": "kitchen bag car",
}
ON_PLACES = {
    "book": "table chair bed sofa",
    "key": "table chair bed",
    "phone": "table chair bed sofa",
    "cup": "table",
    "plate": "table",
    "bottle": "table",
    "hat": "table chair bed",
    "newspaper": "table chair sofa",
    "cat": "table chair bed sofa",
    "dog": "bed sofa",
    "bag": "table chair bed sofa",
    "lamp": "table",
}
T1_NOUNS = (
    "book car house table chair bag phone cup box door bed pen shirt hat lamp computer "
    "bicycle umbrella watch dress"
).split()
HAVE_NOUNS = (
    "car book house bicycle computer phone umbrella watch hat dress key pen bag lamp "
    "cat dog bird horse rabbit"
).split()
SEE_NOUNS = "cat dog bird horse rabbit mouse car house bicycle".split()
MY_NOUNS = (
    "book car house bag phone computer bicycle umbrella watch hat dress pen cat dog horse"
).split()
WHERE_NOUNS = "key phone book cat dog bag car pen umbrella watch hat letter".split()


def load_nouns() -> dict[str, dict]:
    nouns = {}
    for en, fr, frg, es, esg, de, deg, zh, cl in pairs(NOUNS, width=9):
        nouns[en] = {"fr": fr, "frg": frg, "es": es, "esg": esg, "de": de, "deg": deg}
        nouns[en] |= {"zh": zh, "cl": cl}
    return nouns


NOUN = load_nouns()
ADJ = {
    en: {"fr": (frm, frf), "es": (esm, esf), "de": de, "zh": zh}
    for en, frm, frf, esm, esf, de, zh in pairs(ADJECTIVES, width=7)
}


def fr_vowel(word: str) -> bool:
    return word[0] in "aeiouyéèêâîôœh"


def fr_def(noun: dict) -> str:
    return "l'" if fr_vowel(noun["fr"]) else ("le" if noun["frg"] == "m" else "la")


def fr_indef(noun: dict) -> str:
    return "un" if noun["frg"] == "m" else "une"


def es_def(noun: dict) -> str:
    return "el" if noun["esg"] == "m" else "la"


def es_indef(noun: dict) -> str:
    return "un" if noun["esg"] == "m" else "una"


DE_ARTICLES = {  # gender -> case -> form
    "m": {"nom": "der", "acc": "den", "dat": "dem", "indef_acc": "einen", "my": "mein"},
    "f": {"nom": "die", "acc": "die", "dat": "der", "indef_acc": "eine", "my": "meine"},
    "n": {"nom": "das", "acc": "das", "dat": "dem", "indef_acc": "ein", "my": "mein"},
}


def de_art(noun: dict, case: str) -> str:
    return DE_ARTICLES[noun["deg"]][case]


def adjective(name: str, noun: dict, lang: str) -> str:
    forms = ADJ[name][lang]
    return forms[0] if noun[lang + "g"] == "m" else forms[1]


def zh_predicate(name: str, is_index: int, adj_index: int, negated: int | None = None):
    """Chinese predicate of "is (not) ADJ": 很 ADJ / 不 ADJ / (不) 是 COLOR 的."""
    zh = ADJ[name]["zh"]
    neg = [("不", [negated])] if negated is not None else []
    if name in COLOR_WORDS:
        return [*neg, ("是", [is_index]), (zh, [adj_index]), ("的", [adj_index])]
    if negated is not None:
        return [*neg, (zh, [adj_index])]
    return [("很", [is_index]), (zh, [adj_index])]


def de_in_place(place: dict, prep: str, i_prep: int, i_the: int):
    """German preposition + dative article: "im" for in + dem, otherwise two words."""
    article = de_art(place, "dat")
    if prep == "in" and article == "dem":
        return [("im", [i_prep, i_the])]
    return [({"in": "in", "on": "auf"}[prep], [i_prep]), (article, [i_the])]


def sentence_adjective(noun_name: str, adj_name: str, negated: bool):
    """The N is (not) ADJ."""
    n = NOUN[noun_name]
    en = ["The", noun_name, "is", *(["not"] if negated else []), adj_name, "."]
    a = len(en) - 2  # adjective index
    fr = [(fr_def(n), [0]), (n["fr"], [1])]
    fr += [("n'", [3]), ("est", [2]), ("pas", [3])] if negated else [("est", [2])]
    fr += [(adjective(adj_name, n, "fr"), [a]), (".", [a + 1])]
    es = [(es_def(n), [0]), (n["es"], [1])]
    es += [("no", [3]), ("es", [2])] if negated else [("es", [2])]
    es += [(adjective(adj_name, n, "es"), [a]), (".", [a + 1])]
    de = [(de_art(n, "nom"), [0]), (n["de"], [1]), ("ist", [2])]
    de += [("nicht", [3])] if negated else []
    de += [(ADJ[adj_name]["de"], [a]), (".", [a + 1])]
    zh = [(n["zh"], [1]), *zh_predicate(adj_name, 2, a, 3 if negated else None), ("。", [a + 1])]
    return en, {"fr": fr, "es": es, "de": de, "zh": zh}


def end_with(targets: dict[str, list], index: int) -> dict[str, list]:
    """Append the full stop (aligned to English token ``index``) to every target."""
    return {lang: [*t, ("。" if lang == "zh" else ".", [index])] for lang, t in targets.items()}


def sentence_transitive(subject: str, verb: str, obj: str):
    """The S verbs the O."""
    s, o = NOUN[subject], NOUN[obj]
    fr_v, es_v, de_v, zh_v = VERBS_3SG[verb][0]
    en = ["The", subject, verb, "the", obj, "."]
    fr = [(fr_def(s), [0]), (s["fr"], [1]), (fr_v, [2]), (fr_def(o), [3]), (o["fr"], [4])]
    es = [(es_def(s), [0]), (s["es"], [1]), (es_v, [2]), (es_def(o), [3]), (o["es"], [4])]
    de = [(de_art(s, "nom"), [0]), (s["de"], [1]), (de_v, [2]), (de_art(o, "acc"), [3])]
    de += [(o["de"], [4])]
    zh = [(s["zh"], [1]), (zh_v, [2]), (o["zh"], [4])]
    return en, end_with({"fr": fr, "es": es, "de": de, "zh": zh}, 5)


def sentence_mass(subject: str, verb: str, obj: str):
    """The S drinks/eats M (French partitive article)."""
    s = NOUN[subject]
    fr_v, es_v, de_v, zh_v = MASS_VERBS[verb][0]
    partitive, fr_o, es_o, de_o, zh_o = MASS_LEX[obj]
    en = ["The", subject, verb, obj, "."]
    fr = [(fr_def(s), [0]), (s["fr"], [1]), (fr_v, [2])]
    fr += [(word, [3]) for word in partitive.replace("'", "' ").split()] + [(fr_o, [3])]
    es = [(es_def(s), [0]), (s["es"], [1]), (es_v, [2]), (es_o, [3])]
    de = [(de_art(s, "nom"), [0]), (s["de"], [1]), (de_v, [2]), (de_o, [3])]
    zh = [(s["zh"], [1]), (zh_v, [2]), (zh_o, [3])]
    return en, end_with({"fr": fr, "es": es, "de": de, "zh": zh}, 4)


def sentence_location(noun_name: str, prep: str, place_name: str):
    """The N is in/on the P."""
    n, p = NOUN[noun_name], NOUN[place_name]
    en = ["The", noun_name, "is", prep, "the", place_name, "."]
    fr_prep, es_prep, zh_post = ("dans", "en", "里") if prep == "in" else ("sur", "sobre", "上")
    fr = [(fr_def(n), [0]), (n["fr"], [1]), ("est", [2]), (fr_prep, [3]), (fr_def(p), [4])]
    es = [(es_def(n), [0]), (n["es"], [1]), ("está", [2]), (es_prep, [3]), (es_def(p), [4])]
    de = [(de_art(n, "nom"), [0]), (n["de"], [1]), ("ist", [2]), *de_in_place(p, prep, 3, 4)]
    zh = [(n["zh"], [1]), ("在", [2, 3]), (p["zh"], [5]), (zh_post, [3]), ("。", [6])]
    return en, {
        "fr": [*fr, (p["fr"], [5]), (".", [6])],
        "es": [*es, (p["es"], [5]), (".", [6])],
        "de": [*de, (p["de"], [5]), (".", [6])],
        "zh": zh,
    }


def sentence_plural(subject: str, verb: str, place_name: str):
    """The Ns verb in the P (Chinese puts the place before the verb)."""
    fr_s, es_art, es_s, de_s, zh_s, kind = PLURAL_LEX[subject]
    fr_v, es_v, de_v, zh_v = VERBS_3PL[verb][0]
    if verb == "eat" and kind in ("pet", "bird"):
        fr_v, es_v, de_v, zh_v = ANIMAL_EAT
    p = NOUN[place_name]
    en = ["The", subject, verb, "in", "the", place_name, "."]
    fr = [("les", [0]), (fr_s, [1]), (fr_v, [2]), ("dans", [3]), (fr_def(p), [4])]
    es = [(es_art.lower(), [0]), (es_s, [1]), (es_v, [2]), ("en", [3]), (es_def(p), [4])]
    de = [("die", [0]), (de_s, [1]), (de_v, [2]), *de_in_place(p, "in", 3, 4)]
    zh = [(zh_s, [1]), ("在", [3]), (p["zh"], [5]), ("里", [3])]
    zh += [(token, [2]) for token in zh_v] + [("。", [6])]
    return en, {
        "fr": [*fr, (p["fr"], [5]), (".", [6])],
        "es": [*es, (p["es"], [5]), (".", [6])],
        "de": [*de, (p["de"], [5]), (".", [6])],
        "zh": zh,
    }


I_VERBS = {  # English -> French subject, French verb, Spanish, German, Chinese
    "have": ("j'", "ai", "tengo", "habe", "有"),
    "want": ("je", "veux", "quiero", "möchte", "想要"),
    "see": ("je", "vois", "veo", "sehe", "看到"),
}


def sentence_i_have(verb: str, noun_name: str):
    """I have/want/see a N."""
    n = NOUN[noun_name]
    fr_i, fr_v, es_v, de_v, zh_v = I_VERBS[verb]
    en = ["I", verb, "an" if noun_name[0] in "aeiou" else "a", noun_name, "."]
    fr = [(fr_i, [0]), (fr_v, [1]), (fr_indef(n), [2]), (n["fr"], [3]), (".", [4])]
    es = [(es_v, [0, 1]), (es_indef(n), [2]), (n["es"], [3]), (".", [4])]
    de = [("ich", [0]), (de_v, [1]), (de_art(n, "indef_acc"), [2]), (n["de"], [3]), (".", [4])]
    zh = [("我", [0]), (zh_v, [1]), ("一", [2]), (n["cl"], [2]), (n["zh"], [3]), ("。", [4])]
    return en, {"fr": fr, "es": es, "de": de, "zh": zh}


def sentence_this_is_my(noun_name: str):
    """This is my N."""
    n = NOUN[noun_name]
    en = ["This", "is", "my", noun_name, "."]
    fr_my = "mon" if n["frg"] == "m" or fr_vowel(n["fr"]) else "ma"
    fr = [("c'", [0]), ("est", [1]), (fr_my, [2]), (n["fr"], [3]), (".", [4])]
    es_this = "este" if n["esg"] == "m" else "esta"
    es = [(es_this, [0]), ("es", [1]), ("mi", [2]), (n["es"], [3]), (".", [4])]
    de = [("das", [0]), ("ist", [1]), (de_art(n, "my"), [2]), (n["de"], [3]), (".", [4])]
    zh = [("这", [0]), ("是", [1]), ("我", [2]), ("的", [2]), (n["zh"], [3]), ("。", [4])]
    return en, {"fr": fr, "es": es, "de": de, "zh": zh}


def sentence_where(noun_name: str):
    """Where is the N?"""
    n = NOUN[noun_name]
    en = ["Where", "is", "the", noun_name, "?"]
    fr = [("où", [0]), ("est", [1]), (fr_def(n), [2]), (n["fr"], [3]), ("?", [4])]
    es = [("¿", [4]), ("dónde", [0]), ("está", [1]), (es_def(n), [2]), (n["es"], [3])]
    de = [("wo", [0]), ("ist", [1]), (de_art(n, "nom"), [2]), (n["de"], [3]), ("?", [4])]
    zh = [(n["zh"], [3]), ("在", [1]), ("哪里", [0]), ("？", [4])]
    return en, {"fr": fr, "es": [*es, ("?", [4])], "de": de, "zh": zh}


MASS_LEX = {
    en: (partitive, fr, es, de, zh) for en, partitive, fr, es, de, zh in pairs(MASS, width=6)
}
PLURAL_LEX = {row[0]: row[1:] for row in pairs(PLURALS, width=7)}


def capitalize_first(tokens: list[str]) -> list[str]:
    index = 1 if tokens[0] == "¿" else 0
    tokens = list(tokens)
    tokens[index] = tokens[index][0].upper() + tokens[index][1:]
    return tokens


def detokenize(tokens: list[str], lang: str) -> str:
    if lang == "zh":
        return "".join(tokens)
    text = ""
    for i, token in enumerate(tokens):
        glue = i == 0 or tokens[i - 1].endswith("'") or tokens[i - 1] == "¿"
        glue = glue or token == "." or (token == "?" and lang != "fr")
        text += token if glue else " " + token
    return text


def corpus_record(en: list[str], targets: dict[str, list]) -> dict:
    record = {"en": detokenize(en, "en")}
    tokens = {"en": en}
    align = {}
    for lang in ("fr", "es", "de", "zh"):
        words_ = capitalize_first([token for token, _ in targets[lang]])
        record[lang] = detokenize(words_, lang)
        tokens[lang] = words_
        align[lang] = sorted((e, j) for j, (_, links) in enumerate(targets[lang]) for e in links)
        align[lang] = [list(pair) for pair in align[lang]]
    record["tokens"] = tokens
    record["align"] = align
    return record


def corpus_candidates() -> dict[str, list]:
    """Every sentence each template can make, as (en tokens, targets)."""
    out: dict[str, list] = {name: [] for name in ("adj", "neg", "svo", "mass", "in", "on")}
    out |= {name: [] for name in ("plural", "i", "my", "where")}
    for noun in T1_NOUNS:
        for adj in ADJ:
            if adj == "heavy" and noun not in HEAVY_THINGS:
                continue
            out["adj"].append(sentence_adjective(noun, adj, negated=False))
            out["neg"].append(sentence_adjective(noun, adj, negated=True))
    for subject in PEOPLE:
        for verb, (_, objects) in VERBS_3SG.items():
            out["svo"] += [sentence_transitive(subject, verb, obj) for obj in objects.split()]
        for verb, (_, objects) in MASS_VERBS.items():
            out["mass"] += [sentence_mass(subject, verb, obj) for obj in objects.split()]
    for noun, places in IN_PLACES.items():
        out["in"] += [sentence_location(noun, "in", place) for place in places.split()]
    for noun, places in ON_PLACES.items():
        out["on"] += [sentence_location(noun, "on", place) for place in places.split()]
    for subject, row in PLURAL_LEX.items():
        kind = row[-1]
        for verb, (_, kinds, places) in VERBS_3PL.items():
            if kind in ("pet", "bird"):
                places = ANIMAL_PLACES.get((kind, verb), "")
            elif kind not in kinds.split():
                continue
            out["plural"] += [sentence_plural(subject, verb, p) for p in places.split()]
    for verb in I_VERBS:
        nouns = SEE_NOUNS if verb == "see" else HAVE_NOUNS
        out["i"] += [sentence_i_have(verb, noun) for noun in nouns]
    out["my"] = [sentence_this_is_my(noun) for noun in MY_NOUNS]
    out["where"] = [sentence_where(noun) for noun in WHERE_NOUNS]
    return out


CORPUS_SIZES = {
    "adj": 28,
    "neg": 20,
    "svo": 34,
    "mass": 16,
    "in": 26,
    "on": 16,
    "plural": 32,
    "i": 24,
    "my": 12,
    "where": 12,
}  # fmt: skip


def parallel_records(rng: random.Random) -> list[dict]:
    candidates = corpus_candidates()
    records = []
    for name, size in CORPUS_SIZES.items():
        chosen = rng.sample(candidates[name], min(size, len(candidates[name])))
        records += [corpus_record(en, targets) for en, targets in chosen]
    records = shuffled(records, rng)
    sentences = [record["en"] for record in records]
    if len(set(sentences)) != len(sentences):
        raise ValueError("duplicate English sentences in the corpus")
    return records


# -- indirect-object identification (IOI) with counterfactuals ---------------------------------
# Templates written for this project: two people in a place, then one of them (the subject, S)
# gives something to "the other" -- the indirect object (IO), the answer. Each names the pair in
# both orders (IO first: ABBA; S first: BABA). The counterfactual swaps the second mention of S
# for the IO name (MIB's s2-io flip), so its answer is S; both are scored as logit(IO) - logit(S).
IOI_TEMPLATES = [
    "Then, {first} and {second} went to the {place}. {s2} gave a {object} to",
    "When {first} and {second} arrived at the {place}, {s2} handed a {object} to",
    "After {first} and {second} met at the {place}, {s2} passed a {object} to",
    "While {first} and {second} were at the {place}, {s2} offered a {object} to",
    "{first} and {second} spent the afternoon at the {place}. Later, {s2} sent a {object} to",
    "Yesterday {first} and {second} visited the {place}, and {s2} brought a {object} to",
    "At the {place}, {first} and {second} sat together. Then {s2} lent a {object} to",
    "On the way to the {place}, {first} and {second} stopped, and {s2} threw a {object} to",
]
IOI_NAMES = words("""
Mary John Anna David Sarah James Emma Michael Laura Robert Lisa Daniel Kate Thomas Susan Paul
Alice Mark Jessica Peter Rachel Steven Emily Kevin Helen Brian Linda George Karen Eric Amy Frank
Julia Henry Diana Jack Grace Adam Claire Ryan
""")
IOI_PLACES = words("store park school hospital market office restaurant station library garden")
IOI_OBJECTS = words("book drink ring bag key letter gift ball pen flower cake phone")


# The test part of the head-finder protocol (protocols/head_finders.toml): prompts no design
# choice has read, from templates, names, places and objects disjoint from the ones above (a
# test holds them disjoint).
IOI_TEST_TEMPLATES = [
    "During the picnic by the {place}, {first} and {second} talked, and {s2} handed the "
    "{object} to",
    "Once {first} and {second} had reached the {place}, {s2} tossed the {object} over to",
    "{first} and {second} were cleaning the {place} when {s2} slid the {object} across to",
    "Before leaving the {place}, {first} and {second} stopped, and {s2} returned the {object} to",
    "Inside the quiet {place}, {first} sat beside {second}, and {s2} showed the {object} to",
    "As {first} and {second} walked out of the {place}, {s2} gave the old {object} to",
    "It was late at the {place} when {first} and {second} finished, so {s2} mailed the {object} to",
    "Near the {place}, {first} and {second} waited for a bus, and {s2} sold the {object} to",
]
IOI_TEST_NAMES = words("""
Oliver Sophie Lucas Chloe Nathan Megan Victor Hannah Simon Natalie Oscar Lily Patrick Vanessa
Martin Fiona Gary Wendy Dennis Tina Arthur Nancy Leo Sandra Philip Monica Roger Teresa Harry
Sharon Carl Ruth Derek Irene Walter Janet Colin Betty Ralph Joan
""")
IOI_TEST_PLACES = words("beach museum theater bakery stadium harbor farm bridge church airport")
IOI_TEST_OBJECTS = words("map lamp coin hat shirt chair watch basket kite ticket")


def ioi_records(
    rng: random.Random,
    n: int = 600,
    templates: list[str] = IOI_TEMPLATES,
    names: list[str] = IOI_NAMES,
    places: list[str] = IOI_PLACES,
    objects: list[str] = IOI_OBJECTS,
) -> list[dict]:
    """``n`` IOI prompts with their counterfactuals (fields: the template, both names, the place
    and object, ``prompt``, ``counterfactual``, ``answer`` (IO) and ``counterfactual_answer``
    (S), each answer with its leading space)."""
    records = []
    for _ in range(n):
        template = rng.randrange(len(templates))
        io, s = rng.sample(names, 2)
        order = rng.choice(["ABBA", "BABA"])
        first, second = (io, s) if order == "ABBA" else (s, io)
        fill = dict(first=first, second=second, place=rng.choice(places))
        fill["object"] = rng.choice(objects)
        text = templates[template]
        records.append(
            {
                "template": template,
                "order": order,
                "io": io,
                "s": s,
                "prompt": text.format(**fill, s2=s),
                "counterfactual": text.format(**fill, s2=io),
                "answer": " " + io,
                "counterfactual_answer": " " + s,
            }
        )
    return records


def write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def main() -> None:
    rng = random.Random(0)
    tasks = word_tasks(rng)
    registry = {
        name: {"instruction": instruction, "match": match, "kind": "word", "description": text}
        for name, (instruction, match, text) in REGISTRY.items()
    }
    if set(registry) != set(tasks):
        raise ValueError(f"registry and tasks differ: {set(registry) ^ set(tasks)}")
    write_json(DATA / "tasks.json", registry)
    for name, items in tasks.items():
        write_json(DATA / "tasks" / f"{name}.json", items)
        print(f"{name}: {len(items)}")
    records = parallel_records(rng)
    lines = [json.dumps(record, ensure_ascii=False) for record in records]
    (DATA / "parallel.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"parallel.jsonl: {len(records)} sentence tuples")
    ioi = ioi_records(random.Random(46))  # its own generator: the files above stay as they were
    lines = [json.dumps(record, ensure_ascii=False) for record in ioi]
    (DATA / "ioi.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"ioi.jsonl: {len(ioi)} prompts with counterfactuals")
    test = ioi_records(
        random.Random(70), 400, IOI_TEST_TEMPLATES, IOI_TEST_NAMES, IOI_TEST_PLACES,
        IOI_TEST_OBJECTS,
    )  # fmt: skip
    lines = [json.dumps(record, ensure_ascii=False) for record in test]
    (DATA / "ioi_test.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"ioi_test.jsonl: {len(test)} test prompts with counterfactuals")


if __name__ == "__main__":
    main()
