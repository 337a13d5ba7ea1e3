"""TLS principals as Kafka builds them: RFC 2253 names and ssl.principal.mapping.rules."""

import pytest

from kafkarepl.server.config import ConfigError
from kafkarepl.server.ssl_principal import SslPrincipalMapper, distinguished_name

SUBJECT = ((("countryName", "US"),), (("organizationName", "Acme, Inc."),), (("organizationalUnitName", "eng"),),
           (("commonName", "alice"),))


def test_rfc2253_name_most_specific_first_with_escapes():
    assert distinguished_name(SUBJECT) == "CN=alice,OU=eng,O=Acme\\, Inc.,C=US"
    assert distinguished_name(((("commonName", "broker1"),),)) == "CN=broker1"
    assert distinguished_name(((("commonName", " x#"),),)) == "CN=\\ x#"


def test_default_rule_keeps_the_name():
    assert SslPrincipalMapper().name("CN=alice,OU=eng") == "CN=alice,OU=eng"


def test_rules_in_order_with_case_and_groups():
    m = SslPrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$2/U,DEFAULT")
    assert m.name("CN=Svc-Orders,OU=ServiceUsers,O=acme") == "svc-orders"
    assert m.name("CN=bob,OU=eng,O=acme") == "BOB@ENG"
    assert m.name("CN=carol") == "CN=carol"  # DEFAULT


def test_no_matching_rule_and_bad_rules():
    assert SslPrincipalMapper("RULE:^CN=(.*)$/$1/").name("OU=x") is None
    for bad in ("", "RULE:^CN=(.*$/$1/", "NOPE", "DEFAULT,garbage"):
        with pytest.raises(ConfigError):
            SslPrincipalMapper(bad)
