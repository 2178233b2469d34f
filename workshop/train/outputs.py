"""Where a run's outputs survive the pod: S3 (the alternative to a shared FSx for Lustre volume).

With a PersistentVolumeClaim the output directory itself is durable and shared, and nothing here runs. With
`--sync-to s3://bucket/prefix` each node writes checkpoints to its own disk, and after every save the node's
local rank 0 uploads what that node wrote (ZeRO-3 shards are per rank, so the union in S3 is the whole
checkpoint); a restarted job first downloads the newest complete checkpoint. Credentials come from the
default AWS chain (IRSA: the pod's service account), never from the manifest.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from workshop.errors import WorkshopError

_S3 = re.compile(r"^s3://([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:/(.*))?$")
_CKPT = re.compile(r"^checkpoint-(\d+)$")
COMPLETE_MARKER = "trainer_state.json"  # HF Trainer writes it last; a checkpoint without it is unfinished


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """'s3://bucket/some/prefix' -> ('bucket', 'some/prefix'); anything else is an error showing the form."""
    m = _S3.match(str(uri))
    if not m:
        raise WorkshopError(
            f"--sync-to {uri!r} is not an S3 URI such as s3://my-bucket/llama3-run "
            "(bucket: 3-63 lowercase letters, digits, '.' or '-')"
        )
    return m.group(1), (m.group(2) or "").strip("/")


def _client(client=None):
    if client is not None:
        return client
    import boto3

    return boto3.client("s3")


def _key(prefix: str, rel: str) -> str:
    return f"{prefix}/{rel}" if prefix else rel


def upload_dir(local: str | Path, uri: str, *, client=None, marker: bool = True) -> int:
    """Upload every file under `local` to uri/<name of local>/...; the completion marker last (or, with
    marker=False, not at all: a multi-node save uploads it once every node is done). Returns the file
    count."""
    bucket, prefix = parse_s3_uri(uri)
    local = Path(local)
    s3, n = _client(client), 0
    files = sorted(
        (p for p in local.rglob("*") if p.is_file()), key=lambda p: (p.name == COMPLETE_MARKER, str(p))
    )
    for path in files:
        if path.name == COMPLETE_MARKER and path.parent == local and not marker:
            continue
        rel = f"{local.name}/{path.relative_to(local).as_posix()}"
        s3.upload_file(str(path), bucket, _key(prefix, rel))
        n += 1
    return n


def remote_checkpoints(uri: str, *, client=None) -> dict[int, list[str]]:
    """step -> object keys of every checkpoint-<step>/ under the prefix."""
    bucket, prefix = parse_s3_uri(uri)
    out: dict[int, list[str]] = {}
    for page in (
        _client(client).get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=_key(prefix, ""))
    ):
        for obj in page.get("Contents", []):
            rel = obj["Key"][len(_key(prefix, "")) :].lstrip("/")
            m = _CKPT.match(rel.split("/", 1)[0])
            if m:
                out.setdefault(int(m.group(1)), []).append(obj["Key"])
    return out


def restore_latest(uri: str, out_dir: str | Path, *, client=None) -> Path | None:
    """Download the newest COMPLETE checkpoint (it has trainer_state.json) into out_dir, unless it is already
    there; None when S3 holds none. Each node does this once, before training."""
    bucket, prefix = parse_s3_uri(uri)
    s3 = _client(client)
    ckpts = remote_checkpoints(uri, client=s3)
    complete = [step for step, keys in ckpts.items() if any(k.endswith("/" + COMPLETE_MARKER) for k in keys)]
    if not complete:
        return None
    step = max(complete)
    target = Path(out_dir) / f"checkpoint-{step}"
    base = _key(prefix, "")
    for key in ckpts[step]:
        dest = Path(out_dir) / key[len(base) :].lstrip("/")
        if not dest.exists():
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(f".{dest.name}.{os.getpid()}")
            s3.download_file(bucket, key, str(tmp))
            os.replace(tmp, dest)
    return target


def prune(uri: str, keep: int, *, client=None) -> list[int]:
    """Delete all but the newest `keep` checkpoints under the prefix (after the newest is uploaded)."""
    bucket, _ = parse_s3_uri(uri)
    s3 = _client(client)
    ckpts = remote_checkpoints(uri, client=s3)
    gone = sorted(ckpts)[:-keep] if keep > 0 else []
    for step in gone:
        keys = ckpts[step]
        for i in range(0, len(keys), 1000):
            s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[i : i + 1000]]})
    return gone


def sync_callback(uri: str, keep: int | None = None):
    """A TrainerCallback: after each checkpoint, every node's local rank 0 uploads what its node wrote."""
    from transformers import TrainerCallback

    class S3Sync(TrainerCallback):
        def on_save(self, args, state, control, **kw):
            import torch.distributed as dist

            dist.barrier()  # every rank has written its shard
            ckpt = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            rank0 = int(os.environ.get("RANK", "0")) == 0
            if int(os.environ.get("LOCAL_RANK", "0")) == 0 and ckpt.is_dir():
                n = upload_dir(ckpt, uri, marker=False)
            dist.barrier()  # every node's part is in S3: now the marker makes the checkpoint count
            if rank0 and (ckpt / COMPLETE_MARKER).is_file():
                bucket, prefix = parse_s3_uri(uri)
                _client().upload_file(
                    str(ckpt / COMPLETE_MARKER), bucket, _key(prefix, f"{ckpt.name}/{COMPLETE_MARKER}")
                )
                print(
                    f"workshop.train: uploaded {ckpt.name} ({n + 1} files from node 0) to {uri}", flush=True
                )
                events = Path(args.output_dir) / "tensorboard"  # rank 0's TensorBoard events, so far
                if events.is_dir():
                    upload_dir(events, uri)
                if keep:
                    prune(uri, keep)
            dist.barrier()

    return S3Sync()
