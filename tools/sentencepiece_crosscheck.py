#!/usr/bin/python3
"""Cross-checks `mpiddp tokenize` against SentencePiece's own Python binding.

Usage: /usr/bin/python3 tools/sentencepiece_crosscheck.py PREFIX TEXT...

Reads PREFIX.model, encodes the texts with the `sentencepiece` module (Debian's
python3-sentencepiece) as mpiddp defines a text's ids (line by line, each '\\n' the model's
encoding of "\\n": Note [a text line by line] in src/tokenizer/sentencepiece_tokenizer.cpp), and
compares them with PREFIX.train.bin followed by PREFIX.eval.bin (raw uint16, or after llm.c's
1024-byte header). Also checks that the binding decodes the ids back to the texts. Prints OK,
or the first differing token, and exits 1. Optional: never a build or test dependency.
"""
import struct
import sys

import sentencepiece as spm


def token_file(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) >= 1024 and struct.unpack_from("<3i", data)[:2] == (20240520, 1):
        count = struct.unpack_from("<3i", data)[2]
        data = data[1024:1024 + 2 * count]
    return list(struct.unpack("<%dH" % (len(data) // 2), data))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    prefix, texts = sys.argv[1], sys.argv[2:]
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    newline = sp.encode("\n")
    expected = []
    whole = ""
    for path in texts:
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
        whole += text
        lines = text.split("\n")
        for i, line in enumerate(lines):
            expected += sp.encode(line)
            if i + 1 < len(lines):
                expected += newline
    written = token_file(prefix + ".train.bin")
    try:
        written += token_file(prefix + ".eval.bin")
    except FileNotFoundError:
        pass
    if written != expected:
        at = next((i for i, (a, b) in enumerate(zip(written, expected)) if a != b), min(len(written), len(expected)))
        print("DIFFER at token %d of %d (mpiddp) / %d (sentencepiece): %s vs %s" % (
            at, len(written), len(expected), written[at:at + 5], expected[at:at + 5]))
        sys.exit(1)
    if sp.decode(written) != whole:
        print("DIFFER: the binding does not decode the ids back to the text")
        sys.exit(1)
    print("OK: %d tokens identical to sentencepiece %s's, %d pieces, decoded back to %d bytes" % (
        len(written), spm.__version__, sp.get_piece_size(), len(whole.encode("utf-8"))))


if __name__ == "__main__":
    main()
