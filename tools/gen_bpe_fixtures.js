#!/usr/bin/env node
// gen_bpe_fixtures.js: writes test/fixtures/bpe_cases.bin, the GPT-2 encodings test/test_tokenizer.c checks
// nanogpt's tokenizer against, made by implementations that share no code with it.
//
// Reference: OpenAI's tiktoken (npm `tiktoken`, a WASM build of its Rust core) with the "gpt2" encoding.
// Every case is cross-checked against `js-tiktoken` (an independent pure-JS port); the script stops if
// they disagree anywhere except where JavaScript's \s differs from Unicode's White_Space (U+0085 and
// U+FEFF), where tiktoken, like OpenAI's encoder.py, follows White_Space.
//
// Byte strings that are not UTF-8 cannot be given to either (they take strings). For those, the expected
// ids follow nanogpt's documented rule -- split as if each invalid byte were U+FFFD, merge the original
// bytes -- computed by js-tiktoken's own splitting and BPE: each invalid byte is passed as a private-use
// character (U+F700 + byte), which its regex classes as "other" just like U+FFFD, and its UTF-8 encoder is
// replaced by one that turns that character back into the byte.
//
// Run from the repository root (keep node_modules out of the repository):
//     npm install --prefix /tmp/bpe-ref tiktoken@1.0.22 js-tiktoken@1.0.21
//     NODE_PATH=/tmp/bpe-ref/node_modules node tools/gen_bpe_fixtures.js
// It reads test/fixtures/multilingual.txt and Tiny Shakespeare ($NGPT_SHARED_DATA or ../shared/data).
//
// Benchmark mode (used by tools/bench_tokenizer.sh): encode FILE with both, best of REPS, in MB/s:
//     NODE_PATH=/tmp/bpe-ref/node_modules node tools/gen_bpe_fixtures.js --bench FILE [REPS]
//
// bpe_cases.bin, little-endian:
//     char[8] "NGPT-BPE"  u32 version (1)  u32 case count
//     per case: u32 kind, u32 flags (bit 0: allow_special), u32 name length, the name, then
//       kind 0 (inline): u32 byte count, the bytes, u32 id count, u32 ids
//       kind 1 (digest of a shared file, named relative to the shared data folder): u32 file size,
//         u32 CRC-32 of the file, u32 id count, u32 block size B, u32 block count, then the CRC-32 of the
//         ids (as u32 little-endian) of each block of B ids
//     u32 CRC-32 of everything before it
'use strict';
const fs = require('fs');
const path = require('path');

let tiktoken, jsTiktoken;
try {
    tiktoken = require('tiktoken');
    jsTiktoken = require('js-tiktoken');
} catch (e) {
    console.error('gen_bpe_fixtures: needs the npm packages tiktoken and js-tiktoken:\n' +
        '    npm install --prefix /tmp/bpe-ref tiktoken@1.0.22 js-tiktoken@1.0.21\n' +
        '    NODE_PATH=/tmp/bpe-ref/node_modules node tools/gen_bpe_fixtures.js\n(' + e.message + ')');
    process.exit(1);
}
const wasm = tiktoken.get_encoding('gpt2');
const js = jsTiktoken.getEncoding('gpt2');

function encodeRef(text, special) {
    return Array.from(wasm.encode(text, special ? 'all' : [], []));
}
function encodeJs(text, special) {
    return js.encode(text, special ? 'all' : [], []);
}

// ---- benchmark mode ----------------------------------------------------------------------------------
if (process.argv[2] === '--bench') {
    const file = process.argv[3];
    const reps = Number(process.argv[4] || 5);
    const text = fs.readFileSync(file, 'utf8');
    const mb = Buffer.byteLength(text) / 1e6;
    for (const [name, enc] of [['tiktoken (WASM) 1.0.22', (s) => wasm.encode(s, [], [])],
                               ['js-tiktoken 1.0.21', (s) => js.encode(s, [], [])]]) {
        let best = Infinity, n = 0;
        for (let r = 0; r < reps; r++) {
            const t0 = process.hrtime.bigint();
            n = enc(text).length;
            const dt = Number(process.hrtime.bigint() - t0) / 1e9;
            best = Math.min(best, dt);
        }
        console.log(`${name}: ${n} ids in ${(best * 1e3).toFixed(1)} ms = ${(mb / best).toFixed(2)} MB/s (best of ${reps})`);
    }
    process.exit(0);
}

// ---- the cases ---------------------------------------------------------------------------------------
const cases = []; // {name, bytes: Buffer, special, text?: string}
function text(name, s, special = false) { cases.push({ name, bytes: Buffer.from(s, 'utf8'), text: s, special }); }
function bytes(name, arr) { cases.push({ name, bytes: Buffer.from(arr), text: null, special: false }); }
function rng(seed) { // xorshift32, so the cases are the same on every run
    let x = seed >>> 0 || 1;
    return () => { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; return x; };
}

text('empty', '');
text('hello', 'Hello world');
text('english', 'The quick brown fox jumps over the lazy dog. It was the best of times, it was the worst of times.');
text('punctuation', 'Wait... what?! (Really) [yes] {no} <maybe> "quoted" \'single\' `back` -- em—dash, ellipsis… ok.');
text('contractions', "I'm sure you're right: they've gone, she'll stay, he'd know, it's done, don't worry, we'll see.");
text('contractions upper', "I'M SURE YOU'RE RIGHT: THEY'VE GONE, SHE'LL STAY, HE'D KNOW, IT'S DONE, DON'T WORRY.");
text('contraction edges', "'s 'S 's's ''s ' '' ''' x' x'r x're 'r 're're 'll'll 'LL 'Ll 'd'd 'm 'M 't't ' s");
text('apostrophes', "rock'n'roll O'Neil's y'all ain't 'tis 'twas ma'am");
text('code python', 'def encode(self, text: str) -> list[int]:\n    """Encode text."""\n    return [self.vocab.get(w, 0) for w in text.split()]  # comment\n');
text('code c', '#include <stdio.h>\nint main(void) {\n\tfor (int i = 0; i < 10; i++) printf("%d\\n", i);\n\treturn 0;\n}\n');
text('code json', '{"name": "nanogpt", "version": [0, 1, 0], "ok": true, "x": null, "pi": 3.14159e+00}');
text('code html', '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>T&amp;T</title></head></html>');
text('urls', 'https://example.com/path?q=1&r=two#frag user@example.org C:\\Windows\\System32 ~/src/nanogpt/');
text('french', 'Où est la bibliothèque ? Elle est à côté de l\'église, près du château. Ça coûte 12,50 €.');
text('german', 'Größere Straßen führen über die Brücke; Übermäßige Äußerungen sind unnötig.');
text('spanish', '¿Dónde está el niño? ¡Qué día tan bonito! El pingüino comió ñames.');
text('polish', 'Zażółć gęślą jaźń. Łódź leży w środkowej Polsce.');
text('turkish', "İstanbul'da ılık bir gün; Iğdır ve Şırnak. ÇOK GÜZEL!");
text('vietnamese', 'Tôi yêu tiếng Việt; người Việt Nam rất hiếu khách. Phở bò ngon lắm.');
text('greek', 'Η γρήγορη καφέ αλεπού πηδά πάνω από τον τεμπέλη σκύλο. Ω, τι ωραία μέρα!');
text('russian', 'Съешь же ещё этих мягких французских булок, да выпей чаю.');
text('ukrainian', 'Гей, хлопці, їжте ґаву! Київ — столиця України.');
text('hebrew', 'שָׁלוֹם עוֹלָם! הַשָּׁעָה 10:30, וְהַיּוֹם יוֹם שְׁלִישִׁי. שלום בלי ניקוד.');
text('arabic', 'مرحبًا بالعالم! اللغة العربية جميلة جدًّا، والأرقام ٠١٢٣٤٥٦٧٨٩ تُكتب هكذا.');
text('persian', 'سلام دنیا؛ اعداد فارسی ۰۱۲۳۴۵۶۷۸۹ هستند. می\u200cخواهم بروم.');
text('hindi', 'नमस्ते दुनिया! हिन्दी भाषा देवनागरी लिपि में लिखी जाती है। ०१२३४५६७८९');
text('bengali', 'আমি বাংলায় গান গাই। ১২৩ টি বই।');
text('tamil', 'வணக்கம் உலகம்! தமிழ் மொழி மிகவும் பழமையானது.');
text('thai', 'สวัสดีชาวโลก ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ ๑๒๓');
text('chinese', '你好，世界！我们一起学习自然语言处理。今天是2024年11月21日。');
text('japanese', 'こんにちは世界！カタカナとひらがなと漢字を混ぜて書きます。ｶﾀｶﾅ半角。');
text('korean', '안녕하세요, 세계! 한글은 아름다운 글자입니다. 서울에서 만나요.');
text('georgian armenian amharic', 'გამარჯობა, მსოფლიო! Բարեւ, աշխարհ։ ሰላም ለዓለም።');
text('supplementary letters', '𐌰𐌱𐌲 𠀀𠀁 𝐀𝐁𝐂 𝔽ₚ 𐐷𐑌 𝒳𝓎');
text('emoji', '😀😃😄 👍 👍🏽 ❤️ ✈️ ☺ ✔');
text('emoji zwj', '👩‍💻 👨‍👩‍👧‍👦 🧑🏿‍🚀 🏳️‍🌈 🏴‍☠️ 👁️‍🗨️');
text('emoji flags keycaps', '🇯🇵🇫🇷🇧🇷🇺🇳 🏴󠁧󠁢󠁳󠁣󠁴󠁿 1️⃣ #️⃣ *️⃣');
text('combining marks', 'e\u0301 \u00e9 n\u0303 \u00f1 s\u0323\u0307 \u1e69 a\u0310 Z\u0324\u0354\u0367\u0311\u0313a\u0308\u0356\u032d\u0308\u0307 क्षत्रिय நூ');
text('zalgo', 'H\u0335\u0321\u0328e\u0337\u0322l\u0336\u0327l\u0334\u0322o\u0338\u0321 w\u0335\u0328o\u0336r\u0337l\u0334d\u0338');
text('digits ascii', '0 1 12 123 1234 12345 123456 1234567 3.14159 1,234,567.89 -42 +7 1e10 0xDEADBEEF 2024-11-21');
text('digits scripts', '٠١٢٣٤٥٦٧٨٩ ۰۱۲۳۴۵۶۷۸۹ ०१२३४५६७८९ ১২৩ ๑๒๓ ０１２３４５６７８９ 𝟘𝟙𝟚𝟛 ၁၂၃ ១២៣');
text('numbers other', '½ ¼ ¾ ² ³ ¹ ⁴ ₅ Ⅻ ⅻ Ⅳ ① ② ⑳ 〇 一二三 𐄇 x²+y² 10¹⁰');
text('math', '∀x ∈ ℝ: x² ≥ 0; ∑ᵢ aᵢ = ∫₀¹ f(t) dt ≠ ∞. α+β=γ, √2 ≈ 1.414');
text('spaces runs', 'a b  c   d    e     f      g       h        i         j');
text('spaces long', 'x' + ' '.repeat(100) + 'y' + ' '.repeat(33) + '\n' + ' '.repeat(7));
text('spaces only', '          ');
text('space single', ' ');
text('leading trailing', '   leading and trailing   ');
text('newlines', 'a\nb\n\nc\n\n\nd\n\n\n\n\ne\n' + '\n'.repeat(40) + 'f\n');
text('crlf', 'line one\r\nline two\r\n\r\nline four\r\n');
text('tabs', '\tindented\n\t\tdouble\n\t \t mixed \t\n\t');
text('mixed whitespace', ' \t\n \r\n\v\f  x \n\n  y\t\t z \n');
text('indentation', 'def f():\n    if x:\n        return 1\n    else:\n        return 2\n\n\n    \n');
text('nbsp', 'a\u00a0b\u00a0\u00a0c \u00a0d\u00a0 e\u00a0\u00a0\u00a0');
text('ideographic space', '日本\u3000語\u3000\u3000x \u3000y\u3000');
text('line paragraph separators', 'a\u2028b\u2029c\u2028\u2028d \u2028e\u2029\u2029 f');
text('unicode spaces', 'a\u1680b\u2000c\u2001d\u2002e\u2003f\u2004g\u2005h\u2006i\u2007j\u2008k\u2009l\u200am\u202fn\u205fo\u3000p');
text('space runs unicode', 'x\u2003\u2003\u2003y \u2009\u2009z\u00a0 \u00a0w');
text('not whitespace', 'a\u200bb\u200cc\u200dd\u2060e\u180ef\u001cg\u001dh\u001ei\u001fj');
text('U+0085 next line', 'a\u0085b \u0085c\u0085\u0085d \u0085\u0085 e\u0085');
text('U+FEFF bom', '\ufeffstart a\ufeffb \ufeffc\ufeff\ufeffd \ufeff');
text('controls', '\x00\x01\x02 \x1b[31mred\x1b[0m \x7f\x08 bell\x07');
text('eot as text', '<|endoftext|>');
text('eot as text 2', 'end<|endoftext|>start <|endoftext|> x\n<|endoftext|>\n');
text('eot special', '<|endoftext|>', true);
text('eot special 2', 'end<|endoftext|>start <|endoftext|> x\n<|endoftext|>\n', true);
text('eot special adjacent', '<|endoftext|><|endoftext|>a<|endoftext|>  <|endoftext|>', true);
text('eot special partial', '<|endoftext <|endoftext| <|endoftext|>> <<|endoftext|> |endoftext|> <|', true);
text('eot special spaces', 'one   <|endoftext|>   two\n\n<|endoftext|>\n\nthree', true);
text('long word', 'a'.repeat(300));
text('long word 2', 'ab'.repeat(400) + ' ' + 'xyz'.repeat(200));
text('long punctuation', '='.repeat(1000) + '\n' + '-'.repeat(257) + '*'.repeat(64));
text('long digits', '1234567890'.repeat(60));
text('long emoji', '😀'.repeat(100));
text('long cjk', '的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生'.repeat(10));
{
    const r = rng(12345), alphabet = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/';
    let s = '';
    for (let i = 0; i < 1500; i++) s += alphabet[r() % 64];
    text('base64 blob', s);
}
{
    // random mixes of classes: letters, digits, spaces, punctuation and a few scripts
    const r = rng(777);
    const pool = ['a', 'Z', 'é', 'ж', 'ש', 'ع', 'क', 'ि', '中', 'ー', '한', '1', '٣', '½', ' ', ' ', '  ', '\n', '\t', '\u00a0',
                  '\u3000', "'", "'s", "'re", '.', ',', '!', '😀', '\u200d', '👍🏽', '-', '_', '"', '<|endoftext|>'];
    for (let k = 0; k < 12; k++) {
        let s = '';
        const n = 20 + (r() % 200);
        for (let i = 0; i < n; i++) s += pool[r() % pool.length];
        text('random mix ' + k, s, k % 3 === 2);
    }
}
// Not UTF-8. The ids follow nanogpt's rule (see the header).
bytes('invalid ff', [0xff]);
bytes('invalid continuation', [0x80]);
bytes('invalid lone lead', [0xc3]);
bytes('invalid truncated 3', [0xe2, 0x82]);
bytes('invalid truncated 4', [0xf0, 0x9f, 0x98]);
bytes('invalid overlong', [0xc0, 0xaf, 0x20, 0xe0, 0x80, 0xaf, 0x20, 0xf0, 0x80, 0x80, 0xaf]);
bytes('invalid surrogate', [0xed, 0xa0, 0x80, 0xed, 0xbf, 0xbf]);
bytes('invalid above max', [0xf4, 0x90, 0x80, 0x80, 0x20, 0xf5, 0x80, 0x20, 0xf8, 0x88, 0x80, 0x80, 0x80]);
bytes('invalid in words', [...Buffer.from('hello'), 0x80, ...Buffer.from('world caf'), 0xe9, ...Buffer.from(' na'), 0xef, ...Buffer.from('ve')]);
bytes('invalid after space', [0x20, 0xff, 0xfe, 0x20, 0x20, 0xc3, 0x20, 0x41]);
bytes('invalid near contraction', [0x27, 0xff, 0x27, 0x73, 0xff, 0x27, 0x72, 0xc3]);
bytes('invalid in spaces', [0x20, 0x20, 0xff, 0x20, 0x20, 0x0a, 0xa0, 0x0a, 0x20]);
bytes('invalid then valid', [0xc3, 0xa9, 0xc3, 0xc3, 0xa9, 0xe2, 0x82, 0xac, 0xe2, 0x82, 0x41]);
bytes('latin1 text', [...Buffer.from('Caf'), 0xe9, 0x20, ...Buffer.from('cr'), 0xe8, ...Buffer.from('me br'), 0xfb, ...Buffer.from('l'), 0xe9, 0x65]);
{
    const r = rng(4242);
    for (const n of [64, 300, 1000]) {
        const a = [];
        for (let i = 0; i < n; i++) a.push(r() & 0xff);
        bytes('random bytes ' + n, a);
    }
    const a = []; // mostly text, with some bytes broken
    const src = Buffer.from('Ünïcödé text — with “quotes”, 日本語, and emoji 😀 ', 'utf8');
    for (let i = 0; i < 600; i++) a.push(r() % 17 === 0 ? (r() & 0xff) : src[i % src.length]);
    bytes('text with broken bytes', a);
}

// ---- expected ids --------------------------------------------------------------------------------------
const PUA = 0xF700;
// Decodes bytes per Unicode's Table 3-7; each byte that is not part of a well-formed sequence becomes the
// private-use character U+F700 + byte.
function decodeMarked(buf) {
    let out = '';
    for (let i = 0; i < buf.length;) {
        const c = buf[i];
        let need = -1, cp = 0, lo = 0x80, hi = 0xbf;
        if (c < 0x80) { out += String.fromCharCode(c); i++; continue; }
        if (c >= 0xc2 && c <= 0xdf) { need = 1; cp = c & 0x1f; }
        else if (c >= 0xe0 && c <= 0xef) { need = 2; cp = c & 0x0f; if (c === 0xe0) lo = 0xa0; if (c === 0xed) hi = 0x9f; }
        else if (c >= 0xf0 && c <= 0xf4) { need = 3; cp = c & 0x07; if (c === 0xf0) lo = 0x90; if (c === 0xf4) hi = 0x8f; }
        let ok = need > 0;
        for (let k = 1; ok && k <= need; k++) {
            const b = buf[i + k];
            if (b === undefined || b < lo || b > hi) ok = false;
            else { cp = (cp << 6) | (b & 0x3f); lo = 0x80; hi = 0xbf; }
        }
        if (!ok) { out += String.fromCharCode(PUA + c); i++; continue; }
        if (cp >= PUA && cp < PUA + 256) throw new Error('a case uses U+F700..U+F7FF, which marks invalid bytes here');
        out += String.fromCodePoint(cp);
        i += need + 1;
    }
    return out;
}
function encodeMarked(s) { // js-tiktoken's UTF-8 encoder, with the marks turned back into their bytes
    const out = [];
    for (const ch of s) {
        const cp = ch.codePointAt(0);
        if (cp >= PUA && cp < PUA + 256) out.push(cp - PUA);
        else out.push(...Buffer.from(ch, 'utf8'));
    }
    return Uint8Array.from(out);
}

function crc32(buf, crc = 0) {
    crc = ~crc >>> 0;
    for (let i = 0; i < buf.length; i++) {
        crc ^= buf[i];
        for (let k = 0; k < 8; k++) crc = crc & 1 ? (0xEDB88320 ^ (crc >>> 1)) >>> 0 : crc >>> 1;
    }
    return ~crc >>> 0;
}

let differ = 0;
for (const c of cases) {
    if (c.text !== null) {
        if (!Buffer.from(c.text, 'utf8').equals(c.bytes)) throw new Error(c.name + ': not well-formed text');
        c.ids = encodeRef(c.text, c.special);
        const other = encodeJs(c.text, c.special);
        if (other.join(',') !== c.ids.join(',')) {
            if (!/[\u0085\ufeff]/.test(c.text)) {
                console.error(`${c.name}: tiktoken and js-tiktoken disagree:\n  ${c.ids}\n  ${other}`);
                process.exit(1);
            }
            differ++;
            console.log(`note: ${c.name}: js-tiktoken differs (JavaScript's \\s has U+FEFF and lacks U+0085); kept tiktoken's ids`);
        }
    } else {
        const marked = decodeMarked(c.bytes);
        const saved = js.textEncoder;
        js.textEncoder = { encode: encodeMarked };
        try { c.ids = js.encode(marked, [], []); } finally { js.textEncoder = saved; }
        const back = Buffer.concat(c.ids.map((id) => Buffer.from(wasm.decode_single_token_bytes(id))));
        if (!back.equals(c.bytes)) throw new Error(c.name + ': the ids do not decode to the bytes');
    }
}

// ---- files: the multilingual text inline, Tiny Shakespeare as a digest -----------------------------------
const root = path.resolve(__dirname, '..');
const multi = fs.readFileSync(path.join(root, 'test/fixtures/multilingual.txt'));
{
    const s = multi.toString('utf8');
    const ids = encodeRef(s, false), other = encodeJs(s, false);
    if (ids.join(',') !== other.join(',')) { console.error('multilingual.txt: tiktoken and js-tiktoken disagree'); process.exit(1); }
    cases.push({ name: 'multilingual.txt', bytes: multi, special: false, ids });
    const ids2 = encodeRef(s, true);
    if (ids2.join(',') !== encodeJs(s, true).join(',')) { console.error('multilingual.txt (special): disagree'); process.exit(1); }
    cases.push({ name: 'multilingual.txt special', bytes: multi, special: true, ids: ids2 });
}
const shared = process.env.NGPT_SHARED_DATA || path.resolve(root, '../shared/data');
const digests = [];
{
    const name = 'tinyshakespeare.txt';
    const data = fs.readFileSync(path.join(shared, name));
    const ids = encodeRef(data.toString('utf8'), false);
    if (ids.join(',') !== encodeJs(data.toString('utf8'), false).join(',')) { console.error(name + ': disagree'); process.exit(1); }
    const B = 4096, blocks = [];
    for (let i = 0; i < ids.length; i += B) {
        const part = ids.slice(i, i + B), b = Buffer.alloc(4 * part.length);
        part.forEach((v, k) => b.writeUInt32LE(v, 4 * k));
        blocks.push(crc32(b));
    }
    digests.push({ name, size: data.length, crc: crc32(data), n: ids.length, B, blocks });
}

// ---- write ---------------------------------------------------------------------------------------------
const parts = [];
const u32 = (v) => { const b = Buffer.alloc(4); b.writeUInt32LE(v >>> 0); parts.push(b); };
parts.push(Buffer.from('NGPT-BPE', 'ascii'));
u32(1);
u32(cases.length + digests.length);
for (const c of cases) {
    const name = Buffer.from(c.name, 'utf8');
    u32(0); u32(c.special ? 1 : 0); u32(name.length); parts.push(name);
    u32(c.bytes.length); parts.push(c.bytes);
    u32(c.ids.length); for (const id of c.ids) u32(id);
}
for (const d of digests) {
    const name = Buffer.from(d.name, 'utf8');
    u32(1); u32(0); u32(name.length); parts.push(name);
    u32(d.size); u32(d.crc); u32(d.n); u32(d.B); u32(d.blocks.length); for (const h of d.blocks) u32(h);
}
let body = Buffer.concat(parts);
const tail = Buffer.alloc(4); tail.writeUInt32LE(crc32(body));
body = Buffer.concat([body, tail]);
const outPath = path.join(root, 'test/fixtures/bpe_cases.bin');
fs.writeFileSync(outPath + '.tmp', body);
fs.renameSync(outPath + '.tmp', outPath);
console.log(`wrote ${outPath}: ${cases.length} cases + ${digests.length} digest, ${body.length} bytes ` +
    `(${differ} cases where js-tiktoken differs on U+0085/U+FEFF)`);
