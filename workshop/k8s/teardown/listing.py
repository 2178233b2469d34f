"""The inventory as text a learner reads before anything is deleted, and what the command does for a
notebook that reached no cluster."""

from __future__ import annotations

from workshop.k8s.base import PART_OF, TEARDOWN_COMMAND
from workshop.k8s.teardown.model import FIELD_MANAGER, FSX_PRICE_SOURCE, ORDER, Inventory, nodes_text
from workshop.lang import _
from workshop.plan.catalog import PRICE_SOURCE
from workshop.tables import aligned

COMMAND = TEARDOWN_COMMAND


def listing(inv: Inventory) -> list[str]:
    """The inventory as text: the workbook's objects in deletion order with their cost, then the rest."""
    lines = _found(inv) if inv.found else [_nothing_found(inv)]
    if inv.orphans:
        lines.append(
            "Nodes of the workbook's pools whose NodePool is gone (billed until Karpenter terminates them; "
            f"--yes waits for that): {nodes_text(inv.orphans)}"
        )
    if inv.found or inv.orphans:
        node_h, fsx_h, unknown = inv.running_cost()
        lines.append(
            f"Running cost of the above: ${node_h + fsx_h:.2f}/h known (nodes ${node_h:.2f}/h, "
            f"FSx ${fsx_h:.2f}/h)" + (f"; price unknown: {', '.join(unknown)}" if unknown else "")
        )
    lines += _others(inv)
    if inv.found or inv.released:
        lines.append(f"Assumptions: [fsx] {FSX_PRICE_SOURCE}. EC2 nodes at on-demand prices: {PRICE_SOURCE}.")
    return lines


def _nothing_found(inv: Inventory) -> str:
    """The one line that says why no object of the workbook's is listed."""
    if inv.forbidden:
        return (
            f"Could not tell what of the workbook's is on this cluster: listing {', '.join(inv.forbidden)} "
            "was refused (403, see below); nothing here means nothing is there."
        )
    if inv.missing_namespace:
        return f"Namespace {inv.missing_namespace!r} does not exist: nothing of the workbook's in it."
    if inv.orphans:
        return "No object of the workbook's is left, but nodes of its pools are (below)."
    return (
        f"Nothing of the workbook's on this cluster (no object labelled {PART_OF[0]}={PART_OF[1]} "
        f"or applied by field manager `{FIELD_MANAGER}`)."
    )


def _found(inv: Inventory) -> list[str]:
    """The workbook's objects as a table in deletion order, each followed by its details."""
    lines = [
        (
            f"Created by the workbook (label {PART_OF[0]}={PART_OF[1]} or field manager `{FIELD_MANAGER}`), "
            "in the order --yes deletes them:"
        )
    ]
    rows = [("KIND", "NAME", "FOUND BY", "WHILE IT EXISTS")]
    rows += [(f.kind, f.ref, f.found_by, f.cost) for f in inv.found]
    table = aligned(rows)
    lines.append(table[0])
    pad = " " * (len(table[0]) - len("WHILE IT EXISTS"))
    for f, row in zip(inv.found, table[1:]):
        lines.append(row)
        lines += [pad + d for d in f.details]
    return lines


def _others(inv: Inventory) -> list[str]:
    """Released file systems, co-owned and left-alone objects, notes, and what could not be read."""
    lines = []
    if inv.released:
        lines.append(
            "Released FSx volumes on the cluster (their claims are gone; under Retain each file system still "
            "exists and is billed; teardown deletes none):"
        )
        lines += [
            f"  PersistentVolume {v.name} (was {v.claim or '?'}): {v.describe()}; remove: "
            + " && ".join(v.removal())
            for v in inv.released
        ]
    if inv.co_owned:
        lines.append(
            f"Co-owned (applied by `{FIELD_MANAGER}` and by another field manager): listed, never deleted; "
            "remove by hand once nobody else needs it:"
        )
        lines += aligned(inv.co_owned)
    if inv.left_alone:
        lines.append(f"Left alone (same kinds, neither the label nor the field manager `{FIELD_MANAGER}`):")
        lines += aligned(inv.left_alone)
    lines += [f"Not removed: {note}" for note in inv.kept_on_purpose]
    lines += [f"Not looked at: {note}" for note in inv.skipped]
    lines += [f"Could not read: {problem}" for problem in inv.problems]
    return lines


def offline_plan() -> str:
    """What `workshop cluster teardown` does, as text (str), for a notebook that reached no cluster."""
    return "\n".join(
        [
            _(
                "No cluster was used here. On the cluster you used, `{command}` lists every object labelled "
                "{label} or applied by field manager `{manager}`, with the nodes and file system each keeps "
                "paying for, and the similar objects it leaves alone; it deletes nothing."
            ).format(command=COMMAND, label=f"{PART_OF[0]}={PART_OF[1]}", manager=FIELD_MANAGER),
            _(
                "`{command} --yes` then deletes them in this order: {order}, and waits until Karpenter has "
                "drained the nodes (--timeout)."
            ).format(command=COMMAND, order=" -> ".join(ORDER)),
            _(
                "A claim that holds a trained model stops it, unless --keep-model (keep the claim and the "
                "FSx file system; the commands that remove them later are printed) or --delete-model."
            ),
            _(
                "Under reclaimPolicy Retain the FSx file system outlives its claim: its id and the "
                "`aws fsx delete-file-system --file-system-id fs-...` call that ends its cost are printed."
            ),
            _("Run it with the kubeconfig of that cluster: first the listing, then the deletion:"),
            f"  {COMMAND}",
            f"  {COMMAND} --yes",
        ]
    )
