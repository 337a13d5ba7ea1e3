"""The principal of a TLS client certificate, as Kafka's DefaultKafkaPrincipalBuilder:
the subject's distinguished name in RFC 2253 form ("CN=alice,OU=eng,O=acme"), passed
through `ssl.principal.mapping.rules` (KIP-371): a list of `RULE:pattern/replacement/[LU]`
and `DEFAULT`, the first rule whose pattern matches the whole name wins."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from kafkarepl.server.config import ConfigError

_SHORT = {"commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O", "localityName": "L",
          "stateOrProvinceName": "ST", "countryName": "C", "streetAddress": "STREET", "domainComponent": "DC",
          "userId": "UID"}
_RULE = re.compile(r"RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?)|(DEFAULT)")


def _escape(value: str) -> str:
    out = re.sub(r'([,+"\\<>;])', r"\\\1", value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def distinguished_name(subject: Sequence[Sequence[tuple[str, str]]]) -> str:
    """RFC 2253: the certificate's RDNs, most specific (CN) first."""
    return ",".join("+".join(f"{_SHORT.get(k, k)}={_escape(v)}" for k, v in rdn) for rdn in reversed(subject))


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""


class SslPrincipalMapper:
    def __init__(self, rules: str = "DEFAULT") -> None:
        self.rules: list[_Rule] = []
        pos = 0
        text = rules.strip()
        for m in _RULE.finditer(text):
            if text[pos:m.start()].strip(" ,\n\t"):
                raise ConfigError(f"ssl.principal.mapping.rules: cannot parse {text[pos:m.start()]!r}")
            pos = m.end()
            if m.group(4):
                self.rules.append(_Rule(None))
                continue
            try:
                pattern = re.compile(m.group(1))
            except re.error as exc:
                raise ConfigError(f"ssl.principal.mapping.rules: {m.group(1)!r}: {exc}") from None
            # Java's $1 in a replacement is Python's \g<1>
            replacement = re.sub(r"\$(\d+)", r"\\g<\1>", m.group(2).replace("\\/", "/"))
            self.rules.append(_Rule(pattern, replacement, m.group(3)))
        if text[pos:].strip(" ,\n\t") or not self.rules:
            raise ConfigError(f"ssl.principal.mapping.rules: cannot parse {rules!r}")

    def name(self, dn: str) -> str | None:
        """The mapped name; None when no rule matches (Kafka then fails the login)."""
        for rule in self.rules:
            if rule.pattern is None:
                return dn
            m = rule.pattern.fullmatch(dn)
            if m is not None:
                out = m.expand(rule.replacement)
                return out.lower() if rule.case == "L" else out.upper() if rule.case == "U" else out
        return None
