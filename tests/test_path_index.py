"""The fuzzy matcher behind `_session/files` (sidecar/fs/path_index.py), in process: what it
finds is exactly what a plain subsequence test finds, ranked by its tiers; no path makes
its patterns backtrack without end."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.fs.path_index import PathIndex


def is_subsequence(query: str, path: str) -> bool:
    rest = iter(path.lower())
    return all(char in rest for char in query.lower())


segment = st.text(alphabet="abcxyz_.-A", min_size=1, max_size=6)
paths = st.lists(st.lists(segment, min_size=1, max_size=4).map("/".join), max_size=40)


@settings(max_examples=200, deadline=None)
@given(paths, st.text(alphabet="abcxyz_./A", max_size=5))
def test_finds_exactly_the_subsequence_matches(listed: list[str], query: str) -> None:
    index = PathIndex((p, "file") for p in listed)
    found, more = index.match(query, 1000)
    expected = {p for p in set(listed) if is_subsequence(query, p)}
    assert {f.path for f in found} == expected
    assert more is False


def test_tiers_rank_whole_words_in_base_names_first() -> None:
    index = PathIndex(
        (p, "file")
        for p in (
            "docs/config_guide.md",  # "conf" whole, in the base name
            "config/readme.md",  # "conf" whole, in a directory
            "src/c_o_n_f.py",  # scattered in the base name
            "cx/ox/nx/fx.py",  # scattered across directories
            "a/very/long/path/to/conf.py",  # whole and a prefix, but long
            "conf.py",
        )
    )
    found, more = index.match("conf", 10)
    assert [f.path for f in found] == [
        "conf.py",
        "a/very/long/path/to/conf.py",
        "docs/config_guide.md",
        "config/readme.md",
        "src/c_o_n_f.py",
        "cx/ox/nx/fx.py",
    ]
    assert more is False
    top, more = index.match("conf", 2)
    assert [f.path for f in top] == ["conf.py", "a/very/long/path/to/conf.py"] and more


def test_an_empty_query_gives_the_top_level_first() -> None:
    index = PathIndex([("b/deep/x.py", "file"), ("zeta.md", "file"), ("b", "dir")])
    found, _ = index.match("", 10)
    assert [(f.path, f.kind) for f in found] == [
        ("b", "dir"),
        ("zeta.md", "file"),
        ("b/deep/x.py", "file"),
    ]


def test_repeated_characters_do_not_make_it_backtrack() -> None:
    """A backtracking subsequence pattern would take exponential time here; these run
    once per character (possessive classes)."""
    index = PathIndex([("a" * 3000 + "/" + "a" * 3000, "file"), ("ab", "file")])
    found, _ = index.match("a" * 40 + "b", 10)
    assert found == []
    found, _ = index.match("ab", 10)
    assert [f.path for f in found] == ["ab"]


def test_newlines_in_names_are_left_out_and_case_is_ignored() -> None:
    index = PathIndex([("evil\nname", "file"), ("README.md", "file")])
    assert len(index) == 1
    found, _ = index.match("readme", 5)
    assert [f.path for f in found] == ["README.md"]
