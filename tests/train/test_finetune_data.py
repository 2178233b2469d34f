"""Datasets by parameter, offline: a JSONL file's messages through a chat template set here, a named text
column, the held-out split; and the flags' checks."""

import json

import pytest

from workshop.errors import WorkshopError
from workshop.train.args import TrainArgs
from workshop.train.data import as_text, load_text, split_held_out, tokenize_dataset

# a chat template of our own: the tiny tokenizer ships none
TEMPLATE = "{% for m in messages %}<|start|>{{ m['role'] }}\n{{ m['content'] }}<|end|>\n{% endfor %}"


@pytest.fixture
def chat_file(tmp_path):
    path = tmp_path / "chat.jsonl"
    rows = [
        {"messages": [{"role": "user", "content": f"What is {i} + {i}?"},
                      {"role": "assistant", "content": f"It is {2 * i}."}], "id": i}
        for i in range(40)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_chat_messages_go_through_the_tokenizers_template(chat_file, kit_cache):
    from workshop.train.data import local_kit

    _, tok = local_kit(kit_cache)
    with pytest.raises(WorkshopError, match="has none"):  # no template yet: one clear line
        as_text(load_text(str(chat_file), kit_cache), tok, chat=True)
    tok.chat_template = TEMPLATE
    text = as_text(load_text(str(chat_file), kit_cache), tok, chat=True)
    assert text.column_names == ["text"]
    assert text[3]["text"] == "<|start|>user\nWhat is 3 + 3?<|end|>\n<|start|>assistant\nIt is 6.<|end|>\n"
    train, held = split_held_out(text, 0.1, seed=0)
    assert (len(train), len(held)) == (36, 4) and not set(train["text"]) & set(held["text"])
    blocks = tokenize_dataset(train, tok, seq_len=32)
    assert len(blocks) > 0 and all(len(b) == 32 for b in blocks["input_ids"])


def test_a_named_text_column_and_a_missing_one(tmp_path, kit_cache):
    from datasets import Dataset

    from workshop.train.data import local_kit

    _, tok = local_kit(kit_cache)
    ds = Dataset.from_dict({"body": ["one sample", "another one"], "n": [1, 2]})
    assert as_text(ds, tok, column="body")["text"] == ["one sample", "another one"]
    with pytest.raises(WorkshopError, match="no column 'text'; its columns: body, n"):
        as_text(ds, tok)


@pytest.mark.parametrize(
    "kw, words",
    [
        ({"eval_fraction": 1.0}, "not a fraction"),
        ({"eval_steps": 5}, "needs a held-out split"),
        ({"eval_fraction": 0.1, "eval_split": "validation"}, "not both"),
        ({"eval_split": "validation"}, "has no named splits"),
        ({"method": "qlora"}, "method"),
        ({"method": "lora", "lora_rank": 0}, "lora-rank"),
        ({"merge": True}, "needs --method lora --save-model"),
        ({"method": "lora", "lora_targets": " , "}, "lora-targets is empty"),
    ],
)
def test_bad_finetune_flags_are_one_clear_line(tmp_path, kw, words):
    with pytest.raises(WorkshopError, match=words):
        TrainArgs(output_dir=str(tmp_path / "o"), cache_dir=str(tmp_path / "c"), **kw).validate()


def test_new_flags_round_trip_the_command_line():
    from workshop.train.args import from_argv

    args = TrainArgs(
        dataset="org/chat-set", chat=True, eval_fraction=0.1, eval_steps=10, method="lora", lora_rank=16,
        lora_targets="q_proj,v_proj", tensorboard=False,
    )  # fmt: skip
    argv = args.to_argv()
    assert "--no-tensorboard" in argv and "--chat" in argv
    assert from_argv(argv) == args


def test_a_trainjob_carries_the_new_flags(tmp_path):
    from workshop.k8s.trainjob import train_args
    from workshop.train.args import from_argv

    argv = train_args(
        "tiny", dataset="org/chat-set", chat=True, eval_fraction=0.01, eval_steps=50, method="lora",
        lora_rank=16, output_dir=str(tmp_path / "o"), cache_dir=str(tmp_path / "c"),
    )  # fmt: skip
    args = from_argv(argv)
    assert (args.method, args.lora_rank, args.eval_steps, args.chat) == ("lora", 16, 50, True)
    assert args.tensorboard  # on by default: the events go beside the checkpoints
