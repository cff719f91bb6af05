"""bot/issue/github.py against the local GitHub (tests/fakegithub.py): real HTTP, real PyGithub."""
from __future__ import annotations

import time

import pytest
from github import GithubException

from bot.issue.github import (
    DEFAULT_API_URL,
    SearchThrottle,
    github_client,
    github_errors,
    graphql,
    rate_limit_wait,
)
from reducer.errors import ExitCode, ReprobotError
from tests.fakegithub import FakeGitHub


def test_default_points_at_real_github(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REPROBOT_GITHUB_API", raising=False)
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    gh = github_client()
    assert gh.requester.base_url == DEFAULT_API_URL
    assert gh.requester.auth is None


def test_env_overrides_url_and_token(fake_github: FakeGitHub) -> None:
    gh = github_client()
    assert gh.requester.base_url == fake_github.url
    assert gh.get_user().login == "reprobot-bot"  # token from GITHUB_TOKEN reached the server
    assert fake_github.requests[-1].user == "reprobot-bot"
    assert "authorization" not in fake_github.requests[-1].headers


def test_write_client_needs_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    with pytest.raises(ReprobotError) as e:
        github_client(write=True)
    assert e.value.exit_code == ExitCode.NO_TOKEN


def test_bad_api_url_is_a_usage_error() -> None:
    with pytest.raises(ReprobotError) as e:
        github_client("t", api_url="ftp://nowhere")
    assert e.value.exit_code == ExitCode.USAGE


def test_read_client_retries_secondary_rate_limit_get(fake_github: FakeGitHub) -> None:
    fake_github.add_repo("huggingface/peft")
    fake_github.fail_next("GET", r"^/repos/huggingface/peft$", 403, {"Retry-After": "1"})
    t0 = time.monotonic()
    repo = github_client().get_repo("huggingface/peft")
    assert repo.full_name == "huggingface/peft"
    assert time.monotonic() - t0 >= 0.9  # it honoured Retry-After
    assert [r.status for r in fake_github.requests_to("GET", r"^/repos/huggingface/peft$")] == [403, 200]


@pytest.mark.parametrize("after", [False, True])
def test_write_client_never_retries_a_post(fake_github: FakeGitHub, after: bool) -> None:
    fake_github.add_repo("huggingface/peft")
    fake_github.fail_next("POST", r"/issues$", 502, after=after)
    repo = github_client(write=True).get_repo("huggingface/peft")
    with pytest.raises(GithubException) as e:
        repo.create_issue("title", "body")
    assert e.value.status == 502
    assert len(fake_github.requests_to("POST", r"/issues$")) == 1
    # after=True: GitHub did create it; a retry would have filed it twice.
    assert len(fake_github.issues["huggingface/peft"]) == (1 if after else 0)


def test_write_client_does_not_retry_post_on_secondary_limit(fake_github: FakeGitHub) -> None:
    fake_github.add_repo("huggingface/peft")
    fake_github.fail_next("POST", r"/issues$", 403, {"Retry-After": "1"})
    repo = github_client(write=True).get_repo("huggingface/peft")
    with pytest.raises(GithubException):
        repo.create_issue("title", "body")
    assert len(fake_github.requests_to("POST", r"/issues$")) == 1


def test_exhausted_primary_limit_is_one_line_error(fake_github: FakeGitHub) -> None:
    fake_github.add_repo("huggingface/peft")
    fake_github.set_rate("core", remaining=0, reset=int(time.time()) + 3600)
    with pytest.raises(ReprobotError) as e, github_errors("index sync"):
        github_client(max_wait=5).get_repo("huggingface/peft")
    assert e.value.exit_code == ExitCode.NETWORK
    assert "rate limit exhausted" in e.value.message and "\n" not in e.value.message


def test_long_retry_after_is_refused_not_slept(fake_github: FakeGitHub) -> None:
    fake_github.add_repo("huggingface/peft")
    fake_github.fail_next("GET", r"^/repos/", 403, {"Retry-After": "3600"})
    t0 = time.monotonic()
    with pytest.raises(ReprobotError) as e, github_errors("index sync"):
        github_client(max_wait=5).get_repo("huggingface/peft")
    assert time.monotonic() - t0 < 5
    assert e.value.exit_code == ExitCode.NETWORK


def test_unknown_repo_and_bad_token(fake_github: FakeGitHub) -> None:
    with pytest.raises(ReprobotError) as e, github_errors("huggingface/nope"):
        github_client().get_repo("huggingface/nope")
    assert e.value.exit_code == ExitCode.BAD_INPUT and "404" in e.value.message
    with pytest.raises(ReprobotError) as e, github_errors("x"):
        _ = github_client("wrong-token").get_user().login
    assert e.value.exit_code == ExitCode.NO_TOKEN
    assert "wrong-token" not in e.value.message


def test_unreachable_host_is_network_error() -> None:
    with pytest.raises(ReprobotError) as e, github_errors("search"):
        github_client("t", api_url="http://127.0.0.1:9", max_wait=1).get_repo("a/b")
    assert e.value.exit_code == ExitCode.NETWORK


def test_graphql_discussion_comment_roundtrip(fake_github: FakeGitHub) -> None:
    node = fake_github.add_discussion("huggingface/peft", number=12, title="t")
    fake_github.add_discussion_comment(node, "someone else's", author="alice")
    add = graphql("mutation($input: AddDiscussionCommentInput!) { addDiscussionComment(input: $input) "
                  "{ comment { id body } } }", {"input": {"discussionId": node, "body": "draft v1"}})
    cid = add["addDiscussionComment"]["comment"]["id"]
    graphql('mutation { updateDiscussionComment(input: {commentId: "' + cid + '", body: "draft v2"}) '
            "{ comment { id } } }")
    data = graphql("query($id: ID!) { node(id: $id) { ... on Discussion { comments(first: 100) "
                   "{ nodes { id body viewerDidAuthor author { login } } } } } }", {"id": node})
    nodes = data["node"]["comments"]["nodes"]
    assert [(n["body"], n["viewerDidAuthor"]) for n in nodes] == [("someone else's", False), ("draft v2", True)]
    with pytest.raises(ReprobotError):
        graphql("query($id: ID!) { node(id: $id) { id } }", {"id": "D_missing"})


def test_rate_limit_wait_from_headers() -> None:
    assert rate_limit_wait({"Retry-After": "7"}) == 7
    assert rate_limit_wait({"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1010"}, now=1000) == 11
    assert rate_limit_wait({"X-RateLimit-Remaining": "5", "X-RateLimit-Reset": "1010"}, now=1000) == 0


def test_search_throttle_allows_30_per_minute() -> None:
    now = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    th = SearchThrottle(30, clock=lambda: now[0], sleep=sleep)
    for _ in range(30):
        th.acquire()
        now[0] += 0.1
    assert slept == []
    th.acquire()  # the 31st within a minute waits for the first to age out
    assert slept and abs(slept[0] - (60 - 3.0)) < 1e-6
    th.observe({"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(time.time()) + 3600)})
    with pytest.raises(ReprobotError):
        th.acquire()


def test_fake_server_rest_shapes_through_pygithub(fake_github: FakeGitHub) -> None:
    """The endpoints other parts use, read by real PyGithub objects."""
    fake_github.add_repo("huggingface/peft")
    issue = fake_github.add_issue("huggingface/peft", title="t", body="b", labels=["bug"], user="alice")
    fake_github.add_comment("huggingface/peft", issue["number"], "first")
    fake_github.set_permission("huggingface/peft", "maint", "maintain")
    gh = github_client()
    repo = gh.get_repo("huggingface/peft")
    got = repo.get_issue(issue["number"])
    assert (got.title, got.user.login, [lb.name for lb in got.labels]) == ("t", "alice", ["bug"])
    assert [c.body for c in got.get_comments()] == ["first"]
    assert repo.get_collaborator_permission("maint") == "write"  # legacy field; role_name says maintain
    assert repo.get_collaborator_permission("stranger") == "read"
    created = github_client(write=True).get_repo("huggingface/peft").create_issue("new", "body")
    assert created.number == issue["number"] + 1 and created.html_url.endswith(f"/issues/{created.number}")
    assert fake_github.requests_to("POST", r"/issues$")[0].body == {"title": "new", "body": "body"}
    rate = gh.get_rate_limit()
    assert rate.resources.core.limit == 5000 and rate.resources.search.limit == 30


def test_fake_search_pages_and_filters(fake_github: FakeGitHub) -> None:
    fake_github.add_repo("huggingface/peft")
    fake_github.add_repo("huggingface/accelerate")
    for i in range(120):
        fake_github.add_issue("huggingface/peft", title=f"boom {i}", body="Params4bit got an unexpected keyword")
    fake_github.add_issue("huggingface/accelerate", title="other repo", body="Params4bit got an unexpected keyword")
    fake_github.add_issue("huggingface/peft", title="pr", body="Params4bit got an unexpected keyword", is_pr=True)
    res = github_client().search_issues('"got an unexpected keyword" repo:huggingface/peft is:issue')
    assert res.totalCount == 120
    assert len(list(res)) == 120  # followed the Link header across pages
    assert fake_github.requests_to("GET", r"^/search/issues$")[-1].query["page"] == ["2"]
    empty = github_client().search_issues('"not anywhere at all" repo:huggingface/peft')
    assert empty.totalCount == 0


def test_post_whose_answer_is_lost_is_not_resent(fake_github: FakeGitHub) -> None:
    """GitHub created the issue but the connection dropped before the answer: a retry would
    file it twice, so the write client reports the error instead."""
    fake_github.add_repo("huggingface/peft")
    fake_github.fail_next("POST", r"/issues$", 0, after=True)
    repo = github_client(write=True).get_repo("huggingface/peft")
    with pytest.raises(ReprobotError) as e, github_errors("filing"):
        repo.create_issue("title", "body")
    assert e.value.exit_code == ExitCode.NETWORK
    assert len(fake_github.requests_to("POST", r"/issues$")) == 1
    assert len(fake_github.issues["huggingface/peft"]) == 1
