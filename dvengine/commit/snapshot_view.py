"""The slice of a table snapshot a transaction needs, as a structural type.

The commit layer depends on *what* a snapshot offers (version, protocol, metadata, application
transaction watermarks, metadata domains), not on the log package's concrete class, so the two layers can evolve
independently and tests can hand a transaction a tiny fake snapshot. ``dvengine.log``'s
``Snapshot`` satisfies this protocol as is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol as TypingProtocol

from dvengine.protocol.actions import DomainMetadata, Metadata, Protocol, Txn


class SnapshotView(TypingProtocol):
    @property
    def table_root(self) -> str: ...

    @property
    def version(self) -> int: ...

    @property
    def protocol(self) -> Protocol: ...

    @property
    def metadata(self) -> Metadata: ...

    @property
    def app_transactions(self) -> Mapping[str, Txn]: ...

    @property
    def domain_metadata(self) -> Mapping[str, DomainMetadata]: ...
