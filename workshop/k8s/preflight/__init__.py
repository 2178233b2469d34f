"""`workshop cluster preflight`: before a multi-hour job is submitted, check that the cluster, the AWS
account and the Hub token can run it, one verdict per check: pass, fail (with the command or the page that
fixes it), not checked (and why: no kubeconfig, no credentials, no token, the hub unreachable) or not needed
(a CPU plan needs no GPU device plugin).

  model    what the job needs (`Requirements`, built by `requirements_from_plan`), a verdict (`Check`), all of
           them (`Report`, whose exit code is 1 when anything failed)
  matrix   the support matrices the versions are judged by, each with where it was read
  cluster  the cluster's side: server version, Karpenter (CRDs, controller, EC2NodeClass role), Kubeflow
           Trainer + JobSet and the `torch-distributed` runtime, the FSx CSI driver, the device plugins
  aws      the account's side (boto3): the EC2 vCPU quota the plan needs, the type offered in the region
  hub      the Hub's side: may this token download the gated weights?
  run      all of it, each part skipped in one line when its input is missing

Nothing here writes anywhere: every call is a get or a list."""

from workshop.k8s.preflight.model import Check, Report, Requirements, requirements_from_plan
from workshop.k8s.preflight.run import run

__all__ = ["Check", "Report", "Requirements", "requirements_from_plan", "run"]
