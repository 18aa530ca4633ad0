"""The Bifaci v6 cartridge manifest: model, JSON, validation and pools.

* :class:`Manifest` and its parts (:class:`CapGroup`, :class:`CapDef`,
  :class:`ArgDef` with :class:`StdinSource` / :class:`PositionSource` /
  :class:`CliFlagSource`, :class:`OutputDef`, :class:`PoolDeclarations`) are
  immutable values. ``Manifest.from_json`` reads HELLO's ``meta.manifest``;
  ``Manifest.to_json_bytes`` writes it byte-identically to capdag 1.524.58;
  ``Manifest.to_pretty_json`` is the CLI ``manifest`` text.
* :func:`validate_manifest` / :func:`validate_cap` apply the reference's
  rules (``RULE1``..``RULE22``), each failure a :class:`ManifestRuleError`
  naming the rule, the cap and the field.
* :func:`identity_cap` and :meth:`Manifest.build` let an author write a
  manifest in a few lines; :meth:`CapDef.simple` derives a cap's main input
  and output from its URN.
* :class:`PoolTable` and :func:`initial_pools_json` produce the ``pools``
  JSON of HELLO and heartbeat replies and do pool-chain admission.

Example::

    manifest = Manifest.build(
        name="pdf-tools", version="1.0.0", description="PDF helpers",
        caps=[CapDef.simple("cap:in=media:pdf;op=extract-text;out=media:txt",
                            "Extract text", aliases="extract-text")],
    )
    manifest.validate()
    hello_bytes = manifest.to_json_bytes()
"""

from __future__ import annotations

from ._args import (
    OUTPUT_CARRIES_INPUT,
    ArgDef,
    ArgSource,
    CliFlagSource,
    OutputDef,
    PositionSource,
    StdinSource,
)
from ._cap import (
    CAP_ADAPTER_SELECTION,
    CAP_DISCARD,
    CAP_IDENTITY,
    IDENTITY_DESCRIPTION,
    PLANNABLE_KEY,
    CapDef,
    CapGroup,
    DimRef,
    RegisteredBy,
    identity_cap,
)
from ._errors import (
    ManifestError,
    ManifestParseError,
    ManifestRuleError,
    ManifestUrnError,
    MissingIdentityCapError,
    PoolDeclarationError,
    UnknownPoolError,
)
from ._manifest import CHANNELS, Manifest, validate_manifest
from ._pool_declarations import POOL_ALL, PoolDeclarations
from ._pools import (
    CAPACITY_UNLIMITED,
    PoolState,
    PoolTable,
    effective_capacity,
    initial_pools_json,
    parse_desired_capacities,
    parse_pools_json,
)
from ._validate import (
    RESERVED_CLI_FLAGS,
    is_valid_definition_name,
    validate_cap,
    validate_pool_declarations,
)

__all__ = (
    # model
    "Manifest",
    "CapGroup",
    "CapDef",
    "ArgDef",
    "ArgSource",
    "StdinSource",
    "PositionSource",
    "CliFlagSource",
    "OutputDef",
    "DimRef",
    "RegisteredBy",
    "PoolDeclarations",
    # builders and constants
    "identity_cap",
    "CAP_IDENTITY",
    "CAP_DISCARD",
    "CAP_ADAPTER_SELECTION",
    "IDENTITY_DESCRIPTION",
    "PLANNABLE_KEY",
    "OUTPUT_CARRIES_INPUT",
    "CHANNELS",
    "POOL_ALL",
    "RESERVED_CLI_FLAGS",
    # validation
    "validate_manifest",
    "validate_cap",
    "validate_pool_declarations",
    "is_valid_definition_name",
    # pools
    "CAPACITY_UNLIMITED",
    "PoolState",
    "PoolTable",
    "effective_capacity",
    "initial_pools_json",
    "parse_desired_capacities",
    "parse_pools_json",
    # errors
    "ManifestError",
    "ManifestParseError",
    "ManifestRuleError",
    "ManifestUrnError",
    "MissingIdentityCapError",
    "PoolDeclarationError",
    "UnknownPoolError",
)
