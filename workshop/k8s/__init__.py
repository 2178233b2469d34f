"""Kubernetes side of the workbook: typed specs render YAML, `validate` checks it against the real CRDs
(schema + CEL) offline, `cluster` applies it when a cluster is reachable. Nothing here needs a cluster."""
