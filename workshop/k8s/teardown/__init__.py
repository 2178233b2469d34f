"""`workshop cluster teardown`: list everything the workbook created on a cluster and what it costs while it
exists; with `--yes`, remove it in dependency order and wait until Karpenter has drained the nodes.

What is the workbook's: an object labelled `app.kubernetes.io/part-of=workshop`, or one whose
`metadata.managedFields` names the field manager `workshop` (every server-side apply of the workbook uses it,
chapter 05's Trainer install included). Nothing else is ever touched: objects of the same kinds without either
mark are listed as left alone. The kinds looked at, in the order `--yes` deletes them:

  TrainJob -> PersistentVolumeClaim -> StorageClass -> NodePool -> EC2NodeClass -> ClusterTrainingRuntime ->
  Secret

TrainJobs first (their pods hold nodes and mount the claim), then the claims (and the StorageClass that
provisions their file systems), then the pools: deleting a NodePool makes Karpenter drain and terminate its
nodes (the EC2NodeClass's finalizer waits for that), then the runtimes and the HF token Secret nothing needs
any more. Teardown then waits (`--timeout`) until no NodeClaim of a deleted pool is left.

What each object costs is read from the cluster: a NodePool's NodeClaims (instance type, capacity type), the
nodes a kept TrainJob's running pods sit on, a claim's FSx for Lustre file system (its PersistentVolume's
`spec.csi.volumeHandle` is the file system id, its capacity the size). EC2 prices come from
`workshop.plan.catalog` (on-demand list prices it is sure of; "unknown" otherwise); FSx is priced at the
SCRATCH_2 list price of workshop.plan.rates, an assumption that is printed with its source.

The trained model is never lost by accident. A claim holds a model when
  * it carries the annotation `models.workshop.example.com/<job>: /fsx/<job>/final`, which
    `jobs.run_on_cluster` writes when a job that saves its model there ends Complete, before it deletes the
    job (`storage.MODEL_ANNOTATION`; for a job run another way, `kubectl annotate` it by hand), or
  * a TrainJob still on the cluster has ended Complete, mounts the claim and passes `--save-model` with its
    `--output-dir` on that mount (the model is then `<output-dir>/final`).
Then `--yes` stops before deleting anything, unless `--keep-model` (everything else goes; the claim, its
StorageClass and the file system stay, and the commands that remove them later are printed) or
`--delete-model` (the claim goes too). The StorageClass reclaims with `Retain`, so deleting a claim never
deletes the FSx file system: the released PersistentVolume is named with its file system id and the
`aws fsx delete-file-system` call that ends its cost (teardown never deletes a file system itself).

Not removed on purpose: the Kubeflow Trainer controller (its CRDs hold every TrainJob on the cluster, other
people's too), and chapter 05's self-referencing security-group rules (EC2, not the cluster; they cost
nothing).

"Deleted" is said only of an object a re-read no longer finds. One a finalizer holds stays Terminating: it is
named with the finalizer and what removes it (`kubernetes.io/pvc-protection`: kube-controller-manager's PVC
protection controller, once no pod mounts the claim; teardown lists the pods and names those that do, or says
none does; `karpenter.sh/termination`: Karpenter drains the node), and teardown waits within `--timeout`.
NodeClaims and Nodes labelled `karpenter.sh/nodepool=<a workbook pool>` are found, and their cost counted,
even after their NodePool is gone (a drain that timed out leaves them); --yes deletes those NodeClaims, so
that Karpenter terminates their instances, and waits. An object the workbook applied that another field
manager (a person's `kubectl`, another tool; not a controller writing status) also applied is co-owned:
listed, never deleted.

Exit codes: 0 listed (dry run) or everything removed; 1 something could not be listed or removed (a 403, a
timeout while Karpenter drains); 2 bad flags or no cluster; 3 stopped, nothing deleted: a claim holds a model;
4 deletion asked for, but objects are still Terminating at the timeout (a finalizer holds them: named).

The package: `model` (kinds, marks, costs), `reading` (the cluster, one object), `describe` (one describer
per kind), `inventory`, `listing` (text), `delete` (the command's work). A notebook calls `teardown` and
`offline_plan`.
"""

from workshop.k8s.teardown.delete import teardown
from workshop.k8s.teardown.listing import offline_plan

__all__ = ["offline_plan", "teardown"]
