"""Text in, packed token blocks out: a local corpus, a locally trained tokenizer, and the `datasets` pipeline.

No hub is needed for the small runs: the corpus is built from docstrings already installed with Python
(deterministic for a given interpreter), and the tokenizer is a byte-level BPE trained on it. The real
sources (`wikitext` from the hub, a hub tokenizer) go through the same pipeline, chosen by a parameter.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import os
import re
import shutil
from pathlib import Path

from workshop.errors import WorkshopError, check_positive

# Standard-library modules whose docstrings make a stable, paragraph-rich English corpus.
CORPUS_MODULES = (
    "argparse",
    "asyncio",
    "base64",
    "bisect",
    "calendar",
    "collections",
    "concurrent.futures",
    "configparser",
    "contextlib",
    "copy",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "difflib",
    "email",
    "enum",
    "fractions",
    "functools",
    "gettext",
    "glob",
    "gzip",
    "hashlib",
    "heapq",
    "hmac",
    "html",
    "http.client",
    "http.server",
    "imaplib",
    "io",
    "ipaddress",
    "itertools",
    "json",
    "logging",
    "mailbox",
    "mimetypes",
    "multiprocessing",
    "numbers",
    "operator",
    "optparse",
    "os",
    "pathlib",
    "pdb",
    "pickle",
    "pkgutil",
    "platform",
    "plistlib",
    "pprint",
    "queue",
    "random",
    "re",
    "sched",
    "secrets",
    "selectors",
    "shelve",
    "shlex",
    "shutil",
    "signal",
    "smtplib",
    "socket",
    "socketserver",
    "sqlite3",
    "ssl",
    "statistics",
    "string",
    "struct",
    "subprocess",
    "tarfile",
    "tempfile",
    "textwrap",
    "threading",
    "timeit",
    "tokenize",
    "trace",
    "traceback",
    "turtle",
    "unittest",
    "urllib.parse",
    "urllib.request",
    "uuid",
    "warnings",
    "wave",
    "weakref",
    "xml.dom.minidom",
    "xml.etree.ElementTree",
    "zipfile",
    "zoneinfo",
)
SPECIAL_TOKENS = {"bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>", "pad_token": "<|pad|>"}


def _docstrings(module_name: str):
    try:
        module = importlib.import_module(module_name)
    except ImportError:  # a module missing on this interpreter (e.g. turtle without Tk) contributes nothing
        return
    seen = set()
    # only objects defined in the module itself: re-exports vary with what else was imported first
    objs = [module] + [
        obj
        for _, obj in sorted(vars(module).items())
        if (inspect.isclass(obj) or inspect.isfunction(obj)) and obj.__module__ == module.__name__
    ]
    for obj in objs:
        members = [obj] + (
            [
                m
                for _, m in sorted(vars(obj).items())
                if inspect.isfunction(m) and m.__module__ == module.__name__
            ]
            if inspect.isclass(obj)
            else []
        )
        for member in members:
            doc = inspect.getdoc(member)
            if doc and doc not in seen:
                seen.add(doc)
                yield doc


def corpus_paragraphs(min_chars: int = 80):
    """Paragraphs (blank-line separated, whitespace folded) from installed docstrings, in a fixed order."""
    seen = set()
    for name in CORPUS_MODULES:
        for doc in _docstrings(name):
            for para in re.split(r"\n\s*\n", doc):
                text = " ".join(para.split())
                if len(text) >= min_chars and text not in seen:
                    seen.add(text)
                    yield text


def build_corpus(path: str | Path, *, min_chars: int = 80, max_lines: int | None = None) -> Path:
    """Write one paragraph per line (like wikitext's lines), deterministically; reuse the file if it is
    current."""
    check_positive("min_chars", min_chars)
    path = Path(path)
    lines = list(corpus_paragraphs(min_chars))[:max_lines]
    if not lines:
        raise WorkshopError("the local corpus came out empty: no docstrings found in the standard library")
    text = "\n".join(lines) + "\n"
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(text)
        os.replace(tmp, path)  # atomic: a reader never sees half a corpus
    return path


def corpus_fingerprint(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]


def train_tokenizer(corpus: str | Path, out_dir: str | Path, vocab_size: int = 8192):
    """Train a byte-level BPE (the kind Llama-3 uses) on the corpus; save it as a transformers tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    check_positive("vocab_size", vocab_size)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS.values()),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train([str(corpus)], trainer)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, **SPECIAL_TOKENS)
    hf.save_pretrained(str(out_dir))
    return hf


def load_tokenizer(source: str | Path, token: str | None = None):
    """A saved local tokenizer directory, or a hub id (the model's own; network or cache, and for Llama a
    token)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(source), token=token)
    if tok.pad_token is None:  # Llama-3's tokenizer has no pad token; padding (the original recipe) needs one
        tok.pad_token = tok.eos_token
    return tok


def local_kit(cache_dir: str | Path, vocab_size: int = 8192):
    """Corpus file + tokenizer, built once into cache_dir and reused (both are deterministic)."""
    cache_dir = Path(cache_dir)
    corpus = build_corpus(cache_dir / "corpus.txt")
    tok_dir = cache_dir / f"tokenizer-{vocab_size}-{corpus_fingerprint(corpus)}"
    if not (tok_dir / "tokenizer.json").exists():
        tmp = cache_dir / f".{tok_dir.name}.{os.getpid()}"
        train_tokenizer(corpus, tmp, vocab_size)
        try:
            os.replace(tmp, tok_dir)  # atomic; if another process won the race, keep its copy
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
    return corpus, load_tokenizer(tok_dir)


def load_text(dataset: str, cache_dir: str | Path, split: str = "train"):
    """`local` (built here), `wikitext` (hub: wikitext-2-raw-v1), a text file (one sample a line), a .jsonl
    file (one JSON object a line) or a hub dataset id (org/name): the rows of `split` (a file has only
    train)."""
    from datasets import load_dataset

    if dataset == "wikitext":
        return load_dataset("wikitext", "wikitext-2-raw-v1", split=split)
    path = build_corpus(Path(cache_dir) / "corpus.txt") if dataset == "local" else Path(dataset).expanduser()
    cache = str(Path(cache_dir) / "hf-datasets")
    if path.is_file():
        kind = "json" if path.suffix in (".jsonl", ".json") else "text"
        return load_dataset(kind, data_files=str(path), split="train", cache_dir=cache)
    if dataset != "local" and "/" in dataset:  # a hub id: the network, or the hub cache offline
        return load_dataset(dataset, split=split)
    raise WorkshopError(
        f"dataset {dataset!r} is not 'local', 'wikitext', an existing text or .jsonl file or a hub id "
        "(org/name)"
    )


def as_text(ds, tokenizer, *, column: str | None = None, chat: bool = False):
    """The rows as one `text` column: the named column as it is, or (chat) a column of messages
    ([{"role": ..., "content": ...}, ...]) formatted by the tokenizer's own chat template, the way the model
    will see a conversation. The loss then covers the whole conversation, prompts included."""
    column = column or ("messages" if chat else "text")
    if column not in ds.column_names:
        raise WorkshopError(
            f"the dataset has no column {column!r}; its columns: {', '.join(ds.column_names)} "
            "(pick one with --text-column)"
        )
    if chat:
        if not getattr(tokenizer, "chat_template", None):
            raise WorkshopError(
                "--chat formats messages with the tokenizer's chat template, and this tokenizer has none; "
                "use a model whose tokenizer has one (an Instruct model), or train on a text column"
            )
        return ds.map(
            lambda ex: {"text": tokenizer.apply_chat_template(ex[column], tokenize=False)},
            remove_columns=ds.column_names,
        )
    if column != "text":
        ds = (
            ds.rename_column(column, "text")
            if "text" not in ds.column_names
            else ds.map(lambda ex: {"text": ex[column]}, remove_columns=ds.column_names)
        )
    return ds.select_columns(["text"])


def split_held_out(ds, fraction: float, seed: int):
    """(train, held-out): a seeded random `fraction` of the rows kept out of training, split before the
    rows are packed, so no block mixes training and held-out text."""
    if not fraction:
        return ds, None
    if len(ds) < 2:
        raise WorkshopError(f"--eval-fraction {fraction} needs at least 2 samples; the dataset has {len(ds)}")
    parts = ds.train_test_split(test_size=fraction, seed=seed, shuffle=True)
    return parts["train"], parts["test"]


def tokenize_dataset(ds, tokenizer, *, seq_len: int, packing: bool = True, min_chars: int = 1):
    """Drop short/empty lines, tokenize, and either PACK into seq_len blocks (no padding) or pad each line.

    Packing concatenates samples separated by EOS and cuts fixed blocks, so every token is a training token.
    Padding (the original workshop's recipe) wastes the pad positions; labels there are -100 so the loss and
    the useful-token count ignore them.
    """
    check_positive("seq_len", seq_len)
    ds = ds.filter(
        lambda ex: len(ex["text"].strip()) > min_chars - 1 if min_chars > 1 else bool(ex["text"].strip())
    )
    if not packing:

        def pad(batch):
            enc = tokenizer(batch["text"], truncation=True, max_length=seq_len, padding="max_length")
            enc["labels"] = [
                [t if m else -100 for t, m in zip(ids, mask)]
                for ids, mask in zip(enc["input_ids"], enc["attention_mask"])
            ]
            return enc

        return ds.map(pad, batched=True, remove_columns=ds.column_names)

    eos = tokenizer.eos_token_id

    def pack(batch):
        ids = [t for text in batch["text"] for t in tokenizer(text)["input_ids"] + [eos]]
        n = len(ids) // seq_len * seq_len
        blocks = [ids[i : i + seq_len] for i in range(0, n, seq_len)]
        return {"input_ids": blocks, "attention_mask": [[1] * seq_len for _ in blocks], "labels": blocks}

    out = ds.map(pack, batched=True, batch_size=1000, remove_columns=ds.column_names)
    if len(out) == 0:
        raise WorkshopError(
            f"no {seq_len}-token block could be packed from the dataset; use a smaller --seq-len"
        )
    return out
