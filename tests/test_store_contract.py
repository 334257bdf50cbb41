"""The `SessionStore` contract, run against every implementation.

A store that passes here can replace another without the manager noticing.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.values import Backend, Mode
from sidecar.domain.errors import SessionNotFound, StaleGeneration, StoreError
from sidecar.domain.records import SessionRecord, SessionState
from sidecar.store import (
    INTERRUPTED_MARKER,
    MemorySessionStore,
    SqliteSessionStore,
)
from sidecar.store.blocking import BlockingStore, blocking
from sidecar.store.postgres import PostgresSessionStore

# The store under test, driven through its async API (store_adapter.BlockingStore).
SessionStore = BlockingStore


def blocking_postgres(url: str) -> tuple[SessionStore, Callable[[], None]]:
    """The PostgreSQL store (opened by its coroutine) on a private loop, as `blocking`."""
    loop = asyncio.new_event_loop()
    store = BlockingStore(loop.run_until_complete(PostgresSessionStore.open(url, timeout=5)), loop)

    def close() -> None:
        try:
            store.close()
        finally:
            loop.close()

    return store, close


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    if request.param == "memory":
        impl, close = blocking(MemorySessionStore)
    elif request.param == "sqlite":
        impl, close = blocking(lambda: SqliteSessionStore(tmp_path / "sessions.db"))
    else:  # a real server (tests/pg_server.py), a fresh database per test
        impl, close = blocking_postgres(request.getfixturevalue("pg_url"))
    yield impl
    close()


def make_record(
    session_id: str | None = None,
    *,
    cwd: str = "/work/a",
    status: SessionState = SessionState.IDLE,
    generation: int = 1,
    **extra: Any,
) -> SessionRecord:
    return SessionRecord(
        session_id=session_id or f"s-{uuid.uuid4().hex}",
        cwd=cwd,
        title="a title",
        mode=Mode.CRAFT,
        backend=Backend.PIPE,
        status=status,
        generation=generation,
        created_at=1000.5,
        updated_at=1000.5,
        **extra,
    )


def add(store: SessionStore, **kwargs: Any) -> SessionRecord:
    record = make_record(**kwargs)
    store.insert(record)
    return record


# --- records ---------------------------------------------------------------


def test_insert_get_round_trip(store: SessionStore) -> None:
    record = make_record(
        "s1", model="m-1", last_error="boom", interrupted=True, status=SessionState.ERROR
    )
    store.insert(record)
    assert store.get("s1") == record
    plain = add(store)
    assert store.get(plain.session_id) == plain


def test_duplicate_insert_is_store_error(store: SessionStore) -> None:
    add(store, session_id="dup")
    with pytest.raises(StoreError, match="dup"):
        store.insert(make_record("dup", cwd="/elsewhere"))
    assert store.get("dup").cwd == "/work/a"


def test_get_unknown_is_not_found(store: SessionStore) -> None:
    with pytest.raises(SessionNotFound):
        store.get("nope")


# --- listing -----------------------------------------------------------------


def test_list_newest_first_and_cwd_filter(store: SessionStore) -> None:
    ids = [add(store, cwd="/a" if i % 2 else "/b").session_id for i in range(6)]
    page, cursor = store.list_page()
    assert [r.session_id for r in page] == ids[::-1]
    assert cursor is None
    only_a, _ = store.list_page(cwd="/a")
    assert [r.session_id for r in only_a] == [ids[5], ids[3], ids[1]]
    assert store.list_page(cwd="/nowhere") == ([], None)


@pytest.mark.parametrize("cwd", [None, "/a"])
@pytest.mark.parametrize("limit", [1, 2, 3, 7, 100])
def test_cursor_paging_no_gaps_no_duplicates(
    store: SessionStore, limit: int, cwd: str | None
) -> None:
    ids = [add(store, cwd="/a" if i % 3 else "/b").session_id for i in range(10)]
    expected = [sid for i, sid in enumerate(ids) if cwd is None or i % 3][::-1]
    seen: list[str] = []
    cursor: int | None = None
    for _ in range(20):
        page, cursor = store.list_page(cwd=cwd, cursor=cursor, limit=limit)
        assert len(page) <= limit
        seen += [r.session_id for r in page]
        if cursor is None:
            break
        assert page, "a non-final page is never empty"
    assert seen == expected


def test_deleted_session_not_listed(store: SessionStore) -> None:
    keep, gone = add(store), add(store)
    store.delete(gone.session_id)
    page, _ = store.list_page()
    assert [r.session_id for r in page] == [keep.session_id]


def test_paging_survives_deleting_the_cursor_row(store: SessionStore) -> None:
    ids = [add(store).session_id for _ in range(4)]
    page, cursor = store.list_page(limit=2)
    store.delete(page[-1].session_id)
    rest, end = store.list_page(cursor=cursor, limit=2)
    assert [r.session_id for r in rest] == [ids[1], ids[0]]
    assert end is None


# --- update and generations ----------------------------------------------------


def test_update_changes_fields_and_updated_at(store: SessionStore) -> None:
    record = add(store)
    updated = store.update(
        record.session_id,
        1,
        status="running",
        title="new",
        model="m2",
        last_error="e",
        interrupted=True,
        mode="plan",
    )
    assert updated.status is SessionState.RUNNING
    assert (updated.title, updated.model, updated.last_error, updated.mode) == (
        "new",
        "m2",
        "e",
        "plan",
    )
    assert updated.interrupted is True
    assert updated.updated_at > record.updated_at
    assert updated.created_at == record.created_at
    assert store.get(record.session_id) == updated
    cleared = store.update(record.session_id, 1, model=None, last_error=None)
    assert (cleared.model, cleared.last_error) == (None, None)
    assert store.get(record.session_id) == cleared


def test_update_rejects_unknown_fields(store: SessionStore) -> None:
    record = add(store)
    with pytest.raises(ValueError, match="message_count"):
        store.update(record.session_id, 1, message_count=9)
    with pytest.raises(ValueError, match="cwd"):
        store.update(record.session_id, 1, title="ok", cwd="/elsewhere")
    assert store.get(record.session_id) == record


def test_update_unknown_session(store: SessionStore) -> None:
    with pytest.raises(SessionNotFound):
        store.update("nope", 1, title="x")


def test_update_is_fenced(store: SessionStore) -> None:
    record = add(store, generation=3)
    with pytest.raises(StaleGeneration) as info:
        store.update(record.session_id, 2, title="stale")
    assert info.value.current == 3
    store.update(record.session_id, 3, status=SessionState.CLOSED)
    with pytest.raises(StaleGeneration):
        store.update(record.session_id, 3, title="after close")
    assert store.get(record.session_id).title == record.title


def test_begin_generation(store: SessionStore) -> None:
    record = add(store, status=SessionState.CLOSED, last_error="old", interrupted=True)
    resumed = store.begin_generation(record.session_id, 1)
    assert resumed.generation == 2
    assert resumed.status is SessionState.CREATING
    assert resumed.last_error is None
    assert resumed.interrupted is True
    assert store.get(record.session_id) == resumed
    with pytest.raises(StaleGeneration):
        store.begin_generation(record.session_id, 1)
    assert store.get(record.session_id).generation == 2
    # the superseded generation can no longer write; the new one can
    with pytest.raises(StaleGeneration):
        store.update(record.session_id, 1, title="old runtime")
    with pytest.raises(StaleGeneration):
        store.append_message(record.session_id, 1, {"role": "user"})
    assert store.update(record.session_id, 2, status="idle").status is SessionState.IDLE
    with pytest.raises(SessionNotFound):
        store.begin_generation("nope", 1)


# --- transcripts ---------------------------------------------------------------


def test_append_indexes_and_count(store: SessionStore) -> None:
    record = add(store)
    indexes = [store.append_message(record.session_id, 1, {"n": i}) for i in range(5)]
    assert indexes == [0, 1, 2, 3, 4]
    after = store.get(record.session_id)
    assert after.message_count == 5
    assert after.updated_at >= record.updated_at
    assert store.messages(record.session_id) == [{"n": i} for i in range(5)]


def test_append_is_fenced(store: SessionStore) -> None:
    record = add(store, generation=2)
    with pytest.raises(StaleGeneration):
        store.append_message(record.session_id, 1, {"x": 1})
    store.update(record.session_id, 2, status="closed")
    with pytest.raises(StaleGeneration):
        store.append_message(record.session_id, 2, {"x": 1})
    assert store.messages(record.session_id) == []
    assert store.get(record.session_id).message_count == 0
    with pytest.raises(SessionNotFound):
        store.append_message("nope", 1, {"x": 1})


def test_messages_paging(store: SessionStore) -> None:
    record = add(store)
    for i in range(7):
        store.append_message(record.session_id, 1, {"n": i})
    assert store.messages(record.session_id, 0, 3) == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert store.messages(record.session_id, 5, 10) == [{"n": 5}, {"n": 6}]
    assert store.messages(record.session_id, 7, 10) == []
    assert store.messages(record.session_id, 100, 10) == []
    assert store.messages(record.session_id, 2, 0) == []
    with pytest.raises(SessionNotFound):
        store.messages("nope")
    empty = add(store)
    assert store.messages(empty.session_id) == []


def test_transcripts_are_per_session(store: SessionStore) -> None:
    a, b = add(store), add(store)
    store.append_message(a.session_id, 1, {"who": "a"})
    store.append_message(b.session_id, 1, {"who": "b"})
    assert store.append_message(a.session_id, 1, {"who": "a2"}) == 1
    assert store.messages(a.session_id) == [{"who": "a"}, {"who": "a2"}]
    assert store.messages(b.session_id) == [{"who": "b"}]


def test_messages_are_copies(store: SessionStore) -> None:
    record = add(store)
    sent: dict[str, Any] = {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    store.append_message(record.session_id, 1, sent)
    sent["role"] = "changed"
    sent["content"][0]["text"] = "changed"
    got = store.messages(record.session_id)[0]
    assert got == {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    got["content"].append("junk")
    got["role"] = "junk"
    assert store.messages(record.session_id)[0] == {
        "role": "user",
        "content": [{"type": "text", "text": "hi"}],
    }
    assert store.messages(record.session_id)[0] is not store.messages(record.session_id)[0]


def test_records_are_frozen(store: SessionStore) -> None:
    record = add(store)
    got = store.get(record.session_id)
    with pytest.raises(AttributeError):
        got.title = "x"  # type: ignore[misc]


# --- delete --------------------------------------------------------------------


def test_delete_removes_record_and_transcript(store: SessionStore) -> None:
    record = add(store)
    store.append_message(record.session_id, 1, {"n": 1})
    store.delete(record.session_id)
    with pytest.raises(SessionNotFound):
        store.get(record.session_id)
    with pytest.raises(SessionNotFound):
        store.messages(record.session_id)
    with pytest.raises(SessionNotFound):
        store.delete(record.session_id)
    # the id is free again and starts with an empty transcript
    store.insert(make_record(record.session_id))
    assert store.messages(record.session_id) == []
    assert store.append_message(record.session_id, 1, {"n": 2}) == 0


def test_delete_unknown(store: SessionStore) -> None:
    with pytest.raises(SessionNotFound):
        store.delete("nope")


# --- reconcile -----------------------------------------------------------------


def test_reconcile_orphans(store: SessionStore) -> None:
    records = {state: add(store, status=state) for state in SessionState}
    running = records[SessionState.RUNNING]
    store.append_message(running.session_id, 1, {"role": "user", "content": "hi"})
    changed = store.reconcile_orphans()

    by_id = {r.session_id: r for r in changed}
    live = {SessionState.IDLE, SessionState.CREATING, SessionState.CLOSING, SessionState.RUNNING}
    assert set(by_id) == {records[s].session_id for s in live}
    for state in live:
        now = store.get(records[state].session_id)
        assert now == by_id[now.session_id]
        assert now.status is SessionState.CLOSED
        assert now.interrupted is (state is SessionState.RUNNING)
        assert now.generation == 1
    for state in (SessionState.CLOSED, SessionState.ERROR):
        assert store.get(records[state].session_id) == records[state]

    assert store.messages(running.session_id) == [
        {"role": "user", "content": "hi"},
        INTERRUPTED_MARKER,
    ]
    assert store.get(running.session_id).message_count == 2
    assert store.messages(records[SessionState.IDLE].session_id) == []
    assert store.reconcile_orphans() == []


def test_reconcile_keeps_earlier_interrupted_flag(store: SessionStore) -> None:
    record = add(store, status=SessionState.IDLE, interrupted=True)
    (changed,) = store.reconcile_orphans()
    assert changed.interrupted is True
    assert store.get(record.session_id).interrupted is True


# --- properties ----------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4)
    ),
    max_leaves=12,
)
messages_strategy = st.lists(st.dictionaries(st.text(), json_values, max_size=5), max_size=25)


# One store serves every example; each example uses a fresh session in it.
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(messages=messages_strategy, page_size=st.integers(min_value=1, max_value=30))
def test_transcript_reads_back_equal_in_order(
    store: SessionStore, messages: list[dict[str, Any]], page_size: int
) -> None:
    record = add(store)
    indexes = [store.append_message(record.session_id, 1, m) for m in messages]
    assert indexes == list(range(len(messages)))
    read: list[dict[str, Any]] = []
    while True:
        page = store.messages(record.session_id, len(read), page_size)
        assert len(page) <= page_size
        if not page:
            break
        read += page
    assert read == messages
    assert store.get(record.session_id).message_count == len(messages)


# --- fork ------------------------------------------------------------------------------


def test_fork_copies_the_transcript_up_to_a_point(store) -> None:
    store.insert(make_record("src"))
    for n in range(5):
        store.append_message("src", 1, {"role": "user", "content": f"m{n}"})
    forked = store.fork("src", make_record("copy").replace(forked_from="src"), 3)
    assert forked.message_count == 3 and forked.forked_from == "src"
    assert store.get("copy") == forked
    assert [m["content"] for m in store.messages("copy")] == ["m0", "m1", "m2"]
    # Independent afterwards: appending to one does not touch the other.
    store.append_message("copy", 1, {"role": "user", "content": "only in copy"})
    assert store.get("src").message_count == 5
    assert [m["content"] for m in store.messages("src")][-1] == "m4"


def test_fork_of_unknown_source_or_existing_id_is_refused(store) -> None:
    store.insert(make_record("src"))
    with pytest.raises(SessionNotFound):
        store.fork("missing", make_record("new"), 0)
    with pytest.raises(StoreError):
        store.fork("src", make_record("src"), 0)
    assert [r.session_id for r in store.list_page()[0]] == ["src"]


# --- update with an appended message: one transaction ------------------------------------


def test_update_with_append_lands_both_or_neither(store) -> None:
    store.insert(make_record("s"))
    record = store.update("s", 1, status="running", append={"role": "user", "content": "go"})
    assert record.status is SessionState.RUNNING and record.message_count == 1
    assert store.messages("s") == [{"role": "user", "content": "go"}]
    with pytest.raises(StaleGeneration):
        store.update("s", 2, status="idle", append={"role": "user", "content": "stale"})
    with pytest.raises(StoreError):
        store.update("s", 1, status="idle", append={"bad": object()})
    after = store.get("s")
    assert after.status is SessionState.RUNNING and after.message_count == 1
    assert store.messages("s") == [{"role": "user", "content": "go"}]


# --- leases, reconciling one session, the clock ------------------------------------------


def test_renew_leases_extends_only_the_owners_leases(store) -> None:
    mine = add(store, lease_owner="me", lease_expires=10.0)
    also = add(store, lease_owner="me", lease_expires=11.0)
    theirs = add(store, lease_owner="them", lease_expires=12.0)
    free = add(store, status=SessionState.CLOSED)
    assert store.renew_leases("me", 99.0) == {mine.session_id, also.session_id}
    assert store.get(mine.session_id).lease_expires == 99.0
    assert store.get(also.session_id).lease_expires == 99.0
    assert store.get(theirs.session_id).lease_expires == 12.0
    assert store.get(free.session_id).lease_expires is None
    assert store.renew_leases("nobody", 99.0) == set()


def test_begin_generation_takes_the_lease(store) -> None:
    record = add(store, status=SessionState.CLOSED)
    resumed = store.begin_generation(
        record.session_id, 1, lease_owner="new holder", lease_expires=42.5
    )
    assert (resumed.lease_owner, resumed.lease_expires) == ("new holder", 42.5)
    assert store.get(record.session_id) == resumed
    assert store.renew_leases("new holder", 50.0) == {record.session_id}


def test_reconcile_touches_only_what_the_test_calls_orphaned(store) -> None:
    orphan = add(store, status=SessionState.RUNNING, lease_owner="dead", lease_expires=1.0)
    alive = add(store, status=SessionState.IDLE, lease_owner="alive", lease_expires=1.0)
    (changed,) = store.reconcile_orphans(lambda r: r.lease_owner == "dead")
    assert changed.session_id == orphan.session_id
    assert changed.status is SessionState.CLOSED and changed.interrupted is True
    assert (changed.lease_owner, changed.lease_expires) == (None, None)
    assert store.get(alive.session_id) == alive
    # One session, read by its key: changed only when the test says so.
    assert store.reconcile_one(alive.session_id, lambda r: False) == alive
    closed = store.reconcile_one(alive.session_id, lambda r: True)
    assert closed.status is SessionState.CLOSED and closed.interrupted is False
    with pytest.raises(SessionNotFound):
        store.reconcile_one("nope", lambda r: True)


def test_the_clock_is_seconds_since_the_epoch(store) -> None:
    # Every store here runs on this machine, so its clock is this one's (give or take).
    assert abs(store.clock() - time.time()) < 60


# --- the session library: last activity, search, archive, import -----------------


def ids(page: tuple[list[SessionRecord], Any]) -> list[str]:
    return [record.session_id for record in page[0]]


def say(store: SessionStore, session_id: str, text: str, role: str = "user") -> None:
    store.append_message(session_id, 1, {"role": role, "content": text, "createdAt": "t"})


def test_list_is_by_last_activity(store: SessionStore) -> None:
    first, second, third = (add(store, session_id=f"act{i}").session_id for i in range(3))
    assert ids(store.list_page()) == [third, second, first]
    say(store, first, "anything")  # an append is activity
    assert ids(store.list_page()) == [first, third, second]
    store.update(second, 1, status=SessionState.RUNNING)
    assert ids(store.list_page()) == [second, first, third]
    page, cursor = store.list_page(limit=2)
    assert cursor is not None
    assert ids(store.list_page(cursor=cursor, limit=2)) == [third]


def test_paging_by_activity_has_no_gaps_while_sessions_move(store: SessionStore) -> None:
    made = [add(store).session_id for _ in range(6)]
    page, cursor = store.list_page(limit=2)
    seen = ids((page, cursor))
    say(store, made[0], "moves to the top")  # moved above the cursor: not seen again
    while cursor is not None:
        page, cursor = store.list_page(cursor=cursor, limit=2)
        seen += ids((page, cursor))
    assert len(seen) == len(set(seen))
    assert set(made) - set(seen) <= {made[0]}


def test_search_by_transcript_text_and_title(store: SessionStore) -> None:
    kettle = add(store, session_id="kettle").session_id
    say(store, kettle, "Please descale the kettle before Friday")
    say(store, kettle, "Done: the kettle is clean.", role="assistant")
    other = add(store, session_id="other").session_id
    say(store, other, "Nothing about kitchens here")
    store.update_metadata(other, title="Garden zucchini plan")
    assert ids(store.list_page(query="descale")) == [kettle]
    assert ids(store.list_page(query="DESCAL")) == [kettle]  # case folded, word prefix
    assert ids(store.list_page(query="zucchini")) == [other]  # the title
    assert ids(store.list_page(query="kettle friday")) == [kettle]  # every word
    assert ids(store.list_page(query="kettle garden")) == []  # not in one session
    assert ids(store.list_page(query="garden nothing")) == [other]  # title + transcript
    assert ids(store.list_page(query="escale")) == []  # prefixes of words, not infixes
    assert ids(store.list_page(query="nowhere")) == []
    assert set(ids(store.list_page(query=""))) == {kettle, other}  # no words: no filter
    assert set(ids(store.list_page(query=None))) == {kettle, other}


@pytest.mark.parametrize(
    "query",
    ['"', '"kettle', "kettle*", "*", "NEAR(kettle friday)", "kettle -friday", "(kettle",
     "kettle)", "AND", "OR kettle", "NOT", "^kettle", "title:kettle", "{kettle}", "'",
     "kettle + friday", ":", "\\", "%", "_", "\x00", "k" * 5000, "a b c d e f g h i j k l m n o p q r"],
)  # fmt: skip
def test_hostile_queries_are_plain_words(store: SessionStore, query: str) -> None:
    kettle = add(store, session_id="kettle").session_id
    say(store, kettle, "descale the kettle before Friday (NEAR the AND gate)")
    found = ids(store.list_page(query=query))  # never an error
    assert found in ([], [kettle])
    if query.strip("\"*()-^:{}'+ ").lower() in ("kettle", "near(kettle friday", "and"):
        assert found == [kettle]


def test_search_follows_every_write(store: SessionStore) -> None:
    source = add(store, session_id="src").session_id
    store.update(source, 1, append={"role": "user", "content": "first marmalade", "turn": 1})
    say(store, source, "second quince")
    fork = store.fork(source, make_record("fork"), 1)
    assert set(ids(store.list_page(query="marmalade"))) == {fork.session_id, source}
    assert ids(store.list_page(query="quince")) == [source]  # not copied
    store.update_metadata(source, title="Renamed jam")
    assert ids(store.list_page(query="renamed")) == [source]
    store.update_metadata(source, title="Again")
    assert ids(store.list_page(query="renamed")) == []
    store.delete(source)
    assert ids(store.list_page(query="marmalade")) == [fork.session_id]
    assert ids(store.list_page(query="quince")) == []
    assert ids(store.list_page(query="again")) == []


def test_search_pages_with_the_same_cursor(store: SessionStore) -> None:
    made = []
    for i in range(7):
        session_id = add(store, session_id=f"p{i}").session_id
        say(store, session_id, f"needle number {i}" if i % 2 == 0 else "hay")
        made.append(session_id)
    expected = [made[i] for i in (6, 4, 2, 0)]
    seen: list[str] = []
    cursor = None
    while True:
        page, cursor = store.list_page(query="needle", cursor=cursor, limit=3)
        seen += [record.session_id for record in page]
        if cursor is None:
            break
    assert seen == expected


def test_archive_hides_from_the_default_listing(store: SessionStore) -> None:
    kept, hidden = add(store, session_id="kept").session_id, add(store, session_id="hid").session_id
    say(store, hidden, "archived words")
    archived = store.update_metadata(hidden, archived=True)
    assert archived.archived is True and store.get(hidden).archived is True
    assert ids(store.list_page()) == [kept]
    assert ids(store.list_page(archived=True)) == [hidden]
    assert ids(store.list_page(archived=None)) == [hidden, kept]
    assert ids(store.list_page(query="archived")) == []
    assert ids(store.list_page(query="archived", archived=True)) == [hidden]
    store.update_metadata(hidden, archived=False)
    assert set(ids(store.list_page())) == {kept, hidden}


def test_insert_with_transcript_stores_all_rows(store: SessionStore) -> None:
    rows = [
        {"role": "user", "content": "imported pelican", "turn": 1, "createdAt": "a"},
        {"role": "assistant", "content": "ok", "tool_calls": [{"id": "c1"}], "createdAt": "b"},
    ]
    record = make_record("imp", status=SessionState.CLOSED, imported_from="orig", turns=1)
    stored = store.insert_with_transcript(record, rows)
    assert stored.message_count == 2 and stored.imported_from == "orig"
    assert store.get("imp") == stored
    assert store.messages("imp") == rows
    assert ids(store.list_page(query="pelican")) == ["imp"]
    say_ok = store.begin_generation("imp", 1)
    assert say_ok.generation == 2
    assert store.append_message("imp", 2, {"role": "user", "content": "more"}) == 2


def test_insert_with_transcript_is_all_or_nothing(store: SessionStore) -> None:
    with pytest.raises(StoreError):
        store.insert_with_transcript(make_record("bad"), [{"ok": 1}, {"no": object()}])
    with pytest.raises(SessionNotFound):
        store.get("bad")
    add(store, session_id="taken")
    with pytest.raises(StoreError, match="taken"):
        store.insert_with_transcript(make_record("taken"), [{"role": "user", "content": "x"}])
    assert store.messages("taken") == []
    assert ids(store.list_page(archived=None)) == ["taken"]


# --- version: one counter per session, bumped by each change the store makes ------------


def test_version_goes_up_by_one_with_each_change_and_the_same_in_every_store(
    store: SessionStore,
) -> None:
    """The same sequence of writes gives the same versions in every store (the numbers
    are spelled out: memory, SQLite and PostgreSQL must all reach them)."""
    record = add(store, session_id="v", status=SessionState.CREATING)
    seen = [store.get("v").version]
    seen.append(store.update("v", 1, status=SessionState.IDLE).version)
    # A change that comes with its transcript row is one change.
    turn = store.update("v", 1, append={"role": "user", "content": "hi"}, turns=1)
    seen.append(turn.version)
    store.append_message("v", 1, {"role": "assistant", "content": "hello"})
    seen.append(store.get("v").version)
    seen.append(store.update_metadata("v", title="renamed").version)
    seen.append(store.update_metadata("v", archived=True).version)
    seen.append(store.update("v", 1, status=SessionState.CLOSING).version)
    seen.append(store.update("v", 1, status=SessionState.CLOSED).version)
    seen.append(store.begin_generation("v", 1, lease_owner="me", lease_expires=5.0).version)
    assert seen == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert store.get("v").version == 9 and record.version == 1
    # The orphan of a running turn: closed, then its interrupted marker appended (two).
    store.update("v", 2, status=SessionState.IDLE)
    store.update("v", 2, status=SessionState.RUNNING)
    assert store.get("v").version == 11
    assert store.reconcile_one("v", lambda _: True).version == 13
    assert store.get("v").version == 13


def test_version_is_not_bumped_by_a_refused_write_nor_a_lease_renewal(
    store: SessionStore,
) -> None:
    add(store, session_id="f", generation=2, lease_owner="me", lease_expires=1.0)
    before = store.get("f")
    with pytest.raises(StaleGeneration):
        store.update("f", 1, title="stale")
    with pytest.raises(StaleGeneration):
        store.update("f", 1, append={"role": "user", "content": "stale"})
    with pytest.raises(StaleGeneration):
        store.append_message("f", 1, {"role": "user", "content": "stale"})
    with pytest.raises(StaleGeneration):
        store.begin_generation("f", 1)
    with pytest.raises(StoreError):  # refused before anything changed: not JSON
        store.update("f", 2, append={"bad": object()})
    assert store.renew_leases("me", 99.0) == {"f"}
    after = store.get("f")
    assert after.version == before.version == 1
    assert after.lease_expires == 99.0 and after.message_count == 0


def test_a_fork_and_an_import_are_new_sessions_at_version_one(store: SessionStore) -> None:
    add(store, session_id="src")
    for n in range(3):
        store.append_message("src", 1, {"role": "user", "content": f"m{n}"})
    assert store.get("src").version == 4
    forked = store.fork("src", make_record("copy", forked_from="src"), 2)
    imported = store.insert_with_transcript(make_record("imp"), [{"role": "user"}])
    assert (forked.version, imported.version) == (1, 1)
    assert (store.get("copy").version, store.get("imp").version) == (1, 1)
    assert store.update_metadata("copy", title="next").version == 2
