"""URNs of Bifaci v6: tagged, media and cap URNs, and the runtime's lookups.

Sans-IO, pure Python (standard library and attrs only). Semantics follow the
reference capdag 1.524.58 / tagged-urn 1.138.43 exactly, as written down in
``protocol_spec`` and checked by ``tests/urn/test_urn_vectors.py``:

* :class:`MediaUrn`, :class:`CapUrn` — immutable, hashable values built with
  ``parse(text)`` (cached); ``str()`` is the canonical text and ``==`` compares
  it; the semantic relations are methods (``is_equivalent``, ``conforms_to``,
  ``is_dispatchable``, ...). Edits return new values under the reference's names
  (``with_tag``, ``without_tag``, ``with_in_spec``, ``merge``, ``subset``,
  ``MediaUrn.least_upper_bound``); ``<`` is the reference's structural order
  (``ordering_key()``), which canonical machines sort by.
* :func:`select_handler` — which registered handler serves a REQ.
* :func:`media_matches_for_stream` / :func:`find_stream_index` — input-stream lookup.
* :func:`main_output_media` / :func:`infer_output_media` — output typing by effect.
* :class:`UrnError` and its subclasses — every refusal, with a ``reason``.
"""

from __future__ import annotations

from ._cap import CapEffect, CapKind, CapUrn
from ._errors import (
    CAP_REASONS,
    MEDIA_REASONS,
    CapUrnError,
    DuplicateKeyError,
    EmptyError,
    EmptyPrefixError,
    EmptyTagComponentError,
    InvalidCharacterError,
    InvalidEscapeSequenceError,
    InvalidTagFormatError,
    MediaUrnError,
    MissingPrefixError,
    NumericKeyError,
    PrefixMismatchError,
    TaggedUrnError,
    UnterminatedQuoteError,
    UrnError,
    WhitespaceInInputError,
)
from ._media import (
    MEDIA_TOP,
    MEDIA_VOID,
    MediaUrn,
    audio_media_urn_for_ext,
    file_media_urn_for_ext,
    image_media_urn_for_ext,
    text_media_urn_for_ext,
)
from ._runtime import (
    ADAPTER_SELECTION_CAP,
    DISCARD_CAP,
    IDENTITY_CAP,
    STANDARD_CAPS,
    find_stream_index,
    infer_output_media,
    is_conformant_output,
    main_output_media,
    media_matches_for_stream,
    ranking_key,
    select_handler,
)

__all__ = (
    # values
    "MediaUrn",
    "CapUrn",
    "CapEffect",
    "CapKind",
    "MEDIA_TOP",
    "MEDIA_VOID",
    # builders for a file extension
    "file_media_urn_for_ext",
    "text_media_urn_for_ext",
    "image_media_urn_for_ext",
    "audio_media_urn_for_ext",
    # runtime lookups
    "IDENTITY_CAP",
    "DISCARD_CAP",
    "ADAPTER_SELECTION_CAP",
    "STANDARD_CAPS",
    "ranking_key",
    "select_handler",
    "media_matches_for_stream",
    "find_stream_index",
    "infer_output_media",
    "main_output_media",
    "is_conformant_output",
    # errors
    "UrnError",
    "TaggedUrnError",
    "EmptyError",
    "MissingPrefixError",
    "EmptyPrefixError",
    "InvalidTagFormatError",
    "EmptyTagComponentError",
    "InvalidCharacterError",
    "DuplicateKeyError",
    "NumericKeyError",
    "UnterminatedQuoteError",
    "InvalidEscapeSequenceError",
    "WhitespaceInInputError",
    "PrefixMismatchError",
    "MediaUrnError",
    "CapUrnError",
    "MEDIA_REASONS",
    "CAP_REASONS",
)
