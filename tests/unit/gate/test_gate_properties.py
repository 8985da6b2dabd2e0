"""The gate's ``.properties`` reader follows Java's ``Properties.load``, with the line of each entry."""

from __future__ import annotations

import pytest

from chaos.gate.gatefile import GateFileError, parse_properties


def entries(text: str) -> dict[str, tuple[str, int]]:
    return {key: (value, line) for key, value, line in parse_properties(text, "p.properties")}


def test_the_three_separators_and_the_whitespace_around_them() -> None:
    found = entries("a=1\nb: 2\nc 3\n  d  =  4\ne\t:\tfive\nf = = g\n")
    assert found == {
        "a": ("1", 1),
        "b": ("2", 2),
        "c": ("3", 3),
        "d": ("4", 4),
        "e": ("five", 5),
        "f": ("= g", 6),  # only the first separator is one
    }


def test_comments_and_blank_lines_are_skipped() -> None:
    found = entries("# a comment\n! another\n   # indented comment\n\n \t \nkey=value # not a comment\n")
    assert found == {"key": ("value # not a comment", 6)}


def test_a_comment_ending_in_a_backslash_does_not_continue() -> None:
    assert entries("# comment \\\nkey=value\n") == {"key": ("value", 2)}


def test_continuation_lines_drop_their_leading_whitespace_and_keep_the_first_line_number() -> None:
    found = entries("servers=a:9092,\\\n        b:9092,\\\n\tc:9092\nnext=1\n")
    assert found == {"servers": ("a:9092,b:9092,c:9092", 1), "next": ("1", 4)}


def test_an_even_number_of_backslashes_does_not_continue() -> None:
    found = entries("path=c:\\\\dir\\\\\nnext=1\n")
    assert found == {"path": ("c:\\dir\\", 1), "next": ("1", 2)}


def test_a_blank_line_ends_a_continuation() -> None:
    assert entries("a=1\\\n\nb=2\n") == {"a": ("1", 1), "b": ("2", 3)}


def test_a_continuation_line_starting_with_a_hash_is_content() -> None:
    assert entries("a=x\\\n  #y\n") == {"a": ("x#y", 1)}


def test_escapes_in_keys_and_values() -> None:
    found = entries("my\\=key\\:x\\ y=tab\\there\\u0041\\n\\q\n")
    assert found == {"my=key:x y": ("tab\thereA\nq", 1)}


def test_line_endings_of_every_kind() -> None:
    assert entries("a=1\r\nb=2\rc=3\n") == {"a": ("1", 1), "b": ("2", 2), "c": ("3", 3)}


def test_values_lose_trailing_whitespace_and_may_be_empty() -> None:
    assert entries("acks=all   \nempty=\nbare\n") == {"acks": ("all", 1), "empty": ("", 2), "bare": ("", 3)}


def test_a_key_given_twice_is_an_error_naming_both_lines() -> None:
    with pytest.raises(GateFileError, match=r"p\.properties:3: acks: already set on line 1"):
        parse_properties("acks=1\nretries=2\nacks=all\n", "p.properties")


def test_a_malformed_unicode_escape_is_an_error_with_the_line() -> None:
    with pytest.raises(GateFileError, match=r"p\.properties:2: malformed \\uXXXX escape"):
        parse_properties("a=1\nb=\\u12G4\n", "p.properties")


def test_an_entry_without_a_key_is_an_error() -> None:
    with pytest.raises(GateFileError, match=r"p\.properties:1: an entry without a key"):
        parse_properties("=value\n", "p.properties")


def test_a_backslash_on_the_last_line_continues_into_nothing() -> None:
    assert entries("a=1\\") == {"a": ("1", 1)}
