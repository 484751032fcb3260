#!/usr/bin/env python3
"""Generate the Unicode character classes of GPT-2's pre-tokenizer as C range tables.

GPT-2 splits text with the regular expression

    's|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+

so the tokenizer in nanogpt.c needs three classes of code points:

    L  letters:    general category Lu, Ll, Lt, Lm or Lo         (\\p{L})
    N  numbers:    general category Nd, Nl or No                 (\\p{N})
    S  whitespace: the White_Space property of PropList.txt      (\\s of OpenAI's encoder.py, which uses
                   the `regex` module, and of tiktoken's Rust regex). White_Space is exactly
                   Zs + Zl + Zp + U+0009..U+000D + U+0085 (true since Unicode 6.3); JavaScript's \\s
                   differs (it adds U+FEFF and lacks U+0085), which is why this is not derived from JS.

Everything else (marks, punctuation, symbols, controls, unassigned, private use) is "other".

The tables are written into the target C file between the lines

    /* BEGIN GENERATED: tools/gen_unicode_tables.py */
    /* END GENERATED: tools/gen_unicode_tables.py */

and nothing else in the file is touched. The data comes from Python's own unicodedata module (standard
library only; its Unicode version is printed and written into the table), or, with --ucd, from a
UnicodeData.txt of any Unicode version.

Usage:
    python3 tools/gen_unicode_tables.py nanogpt.c                 # rewrite the region in place
    python3 tools/gen_unicode_tables.py --check nanogpt.c         # exit 1 if the region is out of date
    python3 tools/gen_unicode_tables.py --ucd UnicodeData.txt --ucd-version 17.0.0 nanogpt.c
"""
import argparse
import os
import sys
import unicodedata

BEGIN = "/* BEGIN GENERATED: tools/gen_unicode_tables.py */"
END = "/* END GENERATED: tools/gen_unicode_tables.py */"
MAX_CP = 0x10FFFF

# The White_Space property (PropList.txt), unchanged since Unicode 6.3. Used only as a cross-check of
# the rule Zs + Zl + Zp + controls below.
WHITE_SPACE = [(0x09, 0x0D), (0x20, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680),
               (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F),
               (0x3000, 0x3000)]


def categories_from_python():
    """General category of every code point, from the unicodedata module."""
    return [unicodedata.category(chr(cp)) for cp in range(MAX_CP + 1)], unicodedata.unidata_version


def categories_from_ucd(path):
    """General category of every code point, from a UnicodeData.txt (ranges given as First/Last)."""
    cats = ["Cn"] * (MAX_CP + 1)
    first = None
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            fields = line.split(";")
            if len(fields) < 3:
                sys.exit(f"{path}:{lineno}: expected at least 3 ';'-separated fields, found {len(fields)}")
            cp, name, cat = int(fields[0], 16), fields[1], fields[2]
            if name.endswith(", First>"):
                first = cp
                continue
            if name.endswith(", Last>"):
                if first is None:
                    sys.exit(f"{path}:{lineno}: a range's Last line without its First line")
                for c in range(first, cp + 1):
                    cats[c] = cat
                first = None
                continue
            cats[cp] = cat
    return cats


def classes(cats):
    """Class letter ('L', 'N', 'S' or None) of every code point."""
    out = [None] * (MAX_CP + 1)
    for cp, cat in enumerate(cats):
        if cat[0] == "L":
            out[cp] = "L"
        elif cat[0] == "N":
            out[cp] = "N"
        elif cat in ("Zs", "Zl", "Zp") or 0x09 <= cp <= 0x0D or cp == 0x85:
            out[cp] = "S"
    spaces = [cp for cp in range(MAX_CP + 1) if out[cp] == "S"]
    want = [cp for lo, hi in WHITE_SPACE for cp in range(lo, hi + 1)]
    if spaces != want:
        sys.exit("whitespace rule disagrees with White_Space: %s" % sorted(set(spaces) ^ set(want)))
    return out


def ranges(cls):
    """Maximal runs of consecutive code points with the same class, other than 'other'."""
    out = []
    for cp, c in enumerate(cls):
        if c is None:
            continue
        if out and out[-1][2] == c and out[-1][1] == cp - 1:
            out[-1][1] = cp
        else:
            out.append([cp, cp, c])
    return out


def render(rs, version, source):
    count = {k: sum(hi - lo + 1 for lo, hi, c in rs if c == k) for k in "LNS"}
    lines = [
        BEGIN,
        "/* Character classes of GPT-2's pre-tokenizer, Unicode %s (%s): sorted, disjoint ranges of" % (version, source),
        " * letters L (%d code points), numbers N (%d) and White_Space S (%d); all else is \"other\"." % (count["L"], count["N"], count["S"]),
        " * Do not edit: rerun python3 tools/gen_unicode_tables.py on this file. */",
        '#define TOK_UNICODE_VERSION "%s"' % version,
        "#define TOK_UNI_NRANGES %d" % len(rs),
        "static const uint32_t tok_uni_ranges[TOK_UNI_NRANGES][2] = {",
    ]
    per_line = 4
    for i in range(0, len(rs), per_line):
        items = ["TOK_%s(0x%04X, 0x%04X)" % (c, lo, hi) for lo, hi, c in rs[i:i + per_line]]
        lines.append("    " + ", ".join(items) + ",")
    lines.append("};")
    lines.append(END)
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("target", help="C file holding the BEGIN/END GENERATED marker lines")
    ap.add_argument("--ucd", help="read general categories from this UnicodeData.txt instead of Python's unicodedata")
    ap.add_argument("--ucd-version", help="the Unicode version of the --ucd file (UnicodeData.txt does not say)")
    ap.add_argument("--check", action="store_true", help="do not write; exit 1 if the region is out of date")
    args = ap.parse_args()

    if args.ucd:
        if not args.ucd_version:
            sys.exit("--ucd needs --ucd-version (UnicodeData.txt does not name its version)")
        cats, version = categories_from_ucd(args.ucd), args.ucd_version
        source = "UnicodeData.txt"
    else:
        cats, version = categories_from_python()
        source = "Python unicodedata"
    rs = ranges(classes(cats))
    block = render(rs, version, source)

    with open(args.target, encoding="utf-8") as f:
        text = f.read()
    b, e = text.find(BEGIN), text.find(END)
    if b < 0 or e < 0 or e < b or text.count(BEGIN) != 1 or text.count(END) != 1:
        sys.exit("%s: expected exactly one line %r followed by one line %r" % (args.target, BEGIN, END))
    if b > 0 and text[b - 1] != "\n":
        sys.exit("%s: the BEGIN marker must start a line" % args.target)
    e_end = text.find("\n", e)
    e_end = len(text) if e_end < 0 else e_end + 1
    new = text[:b] + block + text[e_end:]

    if args.check:
        if new != text:
            print("%s: the Unicode tables differ from what Unicode %s (%s) gives; rerun without --check" %
                  (args.target, version, source))
            sys.exit(1)
        print("%s: Unicode %s tables up to date" % (args.target, version))
        return
    if new != text:
        tmp = args.target + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(new)
        os.replace(tmp, args.target)
    print("%s: %s %d ranges (Unicode %s, %s)" % (args.target, "wrote" if new != text else "unchanged,", len(rs), version, source))


if __name__ == "__main__":
    main()
