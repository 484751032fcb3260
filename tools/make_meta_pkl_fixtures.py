#!/usr/bin/env python3
"""Writes test/fixtures/meta_pkl/*.pkl: nanoGPT's character vocabulary as its data/shakespeare_char/prepare.py
pickles it, for test_data's reader of meta.pkl.

    python3 tools/make_meta_pkl_fixtures.py [path/to/tinyshakespeare.txt]   (default ../shared/data/...)

shakespeare_p{1,2,4,5}.pkl: prepare.py's dict for Tiny Shakespeare with pickle protocols 1, 2, 4 (the
default of Python 3.8 to 3.13) and 5 (3.14's default). wide_p4.pkl: 400 characters from U+0020 up, so
that ids take two bytes and the memo outgrows one byte. text_p0.pkl: protocol 0 (text opcodes, which
the reader refuses). unsorted_p4.pkl: ids not in code point order (refused: they would not be meta.bin's).
"""
import os
import pickle
import sys

here = os.path.dirname(os.path.abspath(__file__))
out_dir = os.path.join(here, '..', 'test', 'fixtures', 'meta_pkl')
src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, '..', '..', 'shared', 'data', 'tinyshakespeare.txt')


def meta_of(chars):
    # as nanoGPT's data/shakespeare_char/prepare.py builds it
    stoi = {ch: i for i, ch in enumerate(chars)}
    itos = {i: ch for i, ch in enumerate(chars)}
    return {'vocab_size': len(chars), 'itos': itos, 'stoi': stoi}


def write(name, meta, protocol):
    with open(os.path.join(out_dir, name), 'wb') as f:
        pickle.dump(meta, f, protocol=protocol)


with open(src, 'r', encoding='utf-8') as f:
    data = f.read()
chars = sorted(list(set(data)))
for protocol in (1, 2, 4, 5):
    write('shakespeare_p%d.pkl' % protocol, meta_of(chars), protocol)
wide = [chr(c) for c in range(0x20, 0x7F)] + [chr(c) for c in range(0xA1, 0xA1 + 400 - 95)]
write('wide_p4.pkl', meta_of(wide), 4)
write('text_p0.pkl', meta_of(chars), 0)
write('unsorted_p4.pkl', meta_of(list(reversed(chars))), 4)
print('wrote', sorted(os.listdir(out_dir)))
