"""Domain errors raised by policy rules and services.

Pure Python so that the rules (and later the engine's scenario loader) can raise
them without Django. The API turns them into HTTP 400/409 bodies that name the
field and the rule.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class FieldError:
    """One broken rule: where (a field path such as
    ``resource_groups[0].flavors[1].resources[0].lending_limit``), which rule
    (a stable identifier clients may match on) and a plain-English message."""

    field: str
    rule: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "rule": self.rule, "message": self.message}


class PolicyInvalid(Exception):
    """The requested change breaks one or more rules; nothing was saved."""

    def __init__(self, errors: Iterable[FieldError]) -> None:
        self.errors = list(errors)
        summary = "; ".join(f"{e.field}: {e.message}" for e in self.errors[:3])
        super().__init__(summary or "invalid policy")

    @classmethod
    def single(cls, field: str, rule: str, message: str) -> PolicyInvalid:
        return cls([FieldError(field, rule, message)])


class HiddenRefusal(PolicyInvalid):
    """Refused as if the object did not exist (another team's team or
    namespace), so the answer does not tell it exists; ``denial`` says, for
    the access log only, what was really refused."""

    def __init__(self, error: FieldError, denial: str) -> None:
        super().__init__([error])
        self.denial = denial


@dataclass
class PolicyConflict(Exception):
    """The change is well-formed but the current state forbids it (the object is
    still referenced, or it changed since the client read it)."""

    message: str
    rule: str
    references: dict[str, list[str]] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.message


def raise_if(errors: list[FieldError]) -> None:
    if errors:
        raise PolicyInvalid(errors)
