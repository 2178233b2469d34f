"""The offline kit: a deterministic corpus, a tokenizer that round-trips, packing without padding."""

import subprocess
import sys

import pytest

from workshop.errors import WorkshopError
from workshop.train.data import build_corpus, load_text, load_tokenizer, tokenize_dataset


def test_corpus_is_deterministic_whatever_was_imported_first(tmp_path):
    """This process (pytest, the suite's imports, its own hash seed) and a fresh one that imports
    transformers first build the same corpus."""
    from workshop.train.data import corpus_fingerprint

    code = (
        "import transformers, email.mime.text, typing; "
        "from workshop.train.data import build_corpus, corpus_fingerprint; "
        f"print(corpus_fingerprint(build_corpus({str(tmp_path / 'fresh.txt')!r})))"
    )
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert fresh.stdout.strip() == corpus_fingerprint(build_corpus(tmp_path / "here.txt"))


def test_corpus_is_paragraph_lines(tmp_path):
    lines = build_corpus(tmp_path / "c.txt").read_text().splitlines()
    assert len(lines) > 1000
    assert min(map(len, lines)) >= 80 and sum(map(len, lines)) / len(lines) > 150


def test_tokenizer_round_trips_and_reloads(kit_cache):
    tok_dir = next(kit_cache.glob("tokenizer-*"))
    tok = load_tokenizer(tok_dir)
    text = "Return a new dictionary with keys from iterable."
    assert tok.decode(tok(text)["input_ids"]) == text
    assert len(tok) == 8192 and tok.eos_token == "<|end_of_text|>" and tok.pad_token == "<|pad|>"


def test_packing_makes_full_blocks_and_padding_masks_labels(kit_cache):
    tok = load_tokenizer(next(kit_cache.glob("tokenizer-*")))
    text = load_text("local", kit_cache)
    packed = tokenize_dataset(text, tok, seq_len=64)
    assert all(len(x) == 64 for x in packed["input_ids"][:50])
    assert all(sum(m) == 64 for m in packed["attention_mask"][:50])  # no padding at all
    padded = tokenize_dataset(text.select(range(50)), tok, seq_len=512, packing=False)
    row = padded[0]
    n = sum(row["attention_mask"])
    assert n < 512 and row["labels"][n:] == [-100] * (512 - n) and row["input_ids"][n] == tok.pad_token_id


def test_too_long_blocks_and_bad_sizes_fail_clearly(kit_cache):
    tok = load_tokenizer(next(kit_cache.glob("tokenizer-*")))
    small = load_text("local", kit_cache).select(range(2))
    with pytest.raises(WorkshopError, match="smaller --seq-len"):
        tokenize_dataset(small, tok, seq_len=100_000)
    with pytest.raises(WorkshopError, match="seq_len must be"):
        tokenize_dataset(small, tok, seq_len=0)
