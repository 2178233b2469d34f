"""Schemas for the core kinds the workbook writes (no CRD exists for them): ObjectMeta, Secret,
StorageClass, PersistentVolumeClaim, with the fields of the Kubernetes API reference, run by the same
validator as a CRD's."""

from __future__ import annotations

# ObjectMeta: a CRD schema only says `metadata: {type: object}`; the API server checks it by hand.
_STRING_MAP = {
    "type": "object",
    "propertyNames": {"format": "qualified-name"},
    "additionalProperties": {"type": "string"},
}
OBJECT_META = {
    "type": "object",
    "required": ["name"],  # server-side apply needs a name (generateName is not enough)
    "properties": {
        "name": {"type": "string", "format": "dns1123-subdomain"},
        "generateName": {"type": "string"},
        "namespace": {"type": "string", "format": "dns1123-label"},
        "labels": {**_STRING_MAP, "additionalProperties": {"type": "string", "format": "label-value"}},
        "annotations": _STRING_MAP,
        "finalizers": {"type": "array", "items": {"type": "string"}},
        "ownerReferences": {
            "type": "array",
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
        "managedFields": {
            "type": "array",
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
        **{k: {"type": "string"} for k in ("uid", "resourceVersion", "selfLink")},
        **{k: {"type": "string", "format": "date-time"} for k in ("creationTimestamp", "deletionTimestamp")},
        **{k: {"type": "integer", "format": "int64"} for k in ("generation", "deletionGracePeriodSeconds")},
    },
}
_SECRET_KEYS = {"pattern": r"^[-._a-zA-Z0-9]+$"}
SECRET = {  # core/v1 Secret: no CRD exists for core kinds
    "type": "object",
    "required": ["apiVersion", "kind", "metadata"],
    "properties": {
        "apiVersion": {"type": "string", "enum": ["v1"]},
        "kind": {"type": "string", "enum": ["Secret"]},
        "metadata": OBJECT_META,
        "data": {
            "type": "object",
            "propertyNames": _SECRET_KEYS,
            "additionalProperties": {"type": "string", "format": "byte"},
        },
        "stringData": {
            "type": "object",
            "propertyNames": _SECRET_KEYS,
            "additionalProperties": {"type": "string"},
        },
        "type": {"type": "string"},
        "immutable": {"type": "boolean"},
    },
}

_QUANTITY = {"x-kubernetes-int-or-string": True, "format": "quantity"}
STORAGE_CLASS = {  # storage.k8s.io/v1 StorageClass (the fields of the Kubernetes API reference)
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "provisioner"],
    "properties": {
        "apiVersion": {"type": "string", "enum": ["storage.k8s.io/v1"]},
        "kind": {"type": "string", "enum": ["StorageClass"]},
        "metadata": OBJECT_META,
        "provisioner": {"type": "string", "minLength": 1},
        "parameters": _STRING_MAP,
        "reclaimPolicy": {"type": "string", "enum": ["Delete", "Retain"]},
        "volumeBindingMode": {"type": "string", "enum": ["Immediate", "WaitForFirstConsumer"]},
        "allowVolumeExpansion": {"type": "boolean"},
        "mountOptions": {"type": "array", "items": {"type": "string"}},
        "allowedTopologies": {
            "type": "array",
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    },
}
PERSISTENT_VOLUME_CLAIM = {  # core/v1 PersistentVolumeClaim
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"type": "string", "enum": ["v1"]},
        "kind": {"type": "string", "enum": ["PersistentVolumeClaim"]},
        "metadata": OBJECT_META,
        "spec": {
            "type": "object",
            "required": ["accessModes", "resources"],
            "properties": {
                "accessModes": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "string",
                        "enum": ["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"],
                    },
                },
                "storageClassName": {"type": "string"},
                "volumeMode": {"type": "string", "enum": ["Filesystem", "Block"]},
                "volumeName": {"type": "string"},
                "resources": {
                    "type": "object",
                    "required": ["requests"],
                    "properties": {
                        "requests": {
                            "type": "object",
                            "required": ["storage"],
                            "additionalProperties": _QUANTITY,
                        },
                        "limits": {"type": "object", "additionalProperties": _QUANTITY},
                    },
                },
                "selector": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "dataSource": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            },
        },
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}
CORE_SCHEMAS = {
    "Secret": SECRET,
    "StorageClass": STORAGE_CLASS,
    "PersistentVolumeClaim": PERSISTENT_VOLUME_CLAIM,
}
