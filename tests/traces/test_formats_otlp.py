"""OTLP normalisation: id encodings, the three attribute dialects, rejected spans."""

import base64
import json

from traces.formats.otlp import decode_id, normalise, spans_from_json

TRACE = "5b8efff798038103d269b633813fc60c"


def request(spans, resource=None):
    return json.dumps({"resourceSpans": [{
        "resource": {"attributes": [{"key": k, "value": {"stringValue": v}} for k, v in (resource or {}).items()]},
        "scopeSpans": [{"scope": {"name": "test", "version": "1.2"}, "spans": spans}],
    }]}).encode()  # fmt: skip


def span(span_id="eee19b7ec3c1b174", trace_id=TRACE, name="chat claude", **attrs):
    values = []
    for key, value in attrs.items():
        key = key.replace("__", ".")
        if isinstance(value, int):
            values.append({"key": key, "value": {"intValue": str(value)}})
        else:
            values.append({"key": key, "value": {"stringValue": value}})
    return {"traceId": trace_id, "spanId": span_id, "name": name, "startTimeUnixNano": "1767225600000000000",
            "endTimeUnixNano": "1767225601000000000", "attributes": values}  # fmt: skip


def test_the_official_example_has_no_llm_spans(shared_fixtures):
    body = (shared_fixtures / "open-telemetry__opentelemetry-proto__trace.json").read_bytes()
    result = normalise(spans_from_json(body))
    assert (result.spans, result.ignored_spans, len(result.calls), result.rejected) == (1, 1, 0, [])


def test_ids_in_hex_or_base64():
    raw = bytes.fromhex(TRACE)
    assert decode_id(TRACE.upper(), 16) == TRACE
    assert decode_id(base64.b64encode(raw).decode(), 16) == TRACE
    assert decode_id(raw, 16) == TRACE


def test_genai_input_includes_cache_counts():
    body = request([span(**{
        "gen_ai__usage__input_tokens": 12000, "gen_ai__usage__cache_read__input_tokens": 9000,
        "gen_ai__usage__cache_creation__input_tokens": 2000, "gen_ai__usage__output_tokens": 300,
        "gen_ai__conversation__id": "conv-1", "gen_ai__response__model": "claude-sonnet-4", "gen_ai__response__id": "msg_1",
    })])  # fmt: skip
    (call,) = normalise(spans_from_json(body)).calls
    assert (
        call.input_tokens,
        call.cache_read_tokens,
        call.cache_creation_tokens,
        call.output_tokens,
        call.context_tokens,
    ) == (1000, 9000, 2000, 300, 12000)
    assert (call.session_id, call.model, call.key) == ("conv-1", "claude-sonnet-4", "msg_1")


def test_genai_with_anthropic_meaning_is_detected():
    body = request(
        [
            span(
                **{
                    "gen_ai__usage__input_tokens": 10,
                    "gen_ai__usage__cache_read__input_tokens": 9000,
                    "gen_ai__usage__output_tokens": 5,
                }
            )
        ]
    )
    (call,) = normalise(spans_from_json(body)).calls
    assert (call.input_tokens, call.cache_read_tokens, call.context_tokens) == (10, 9000, 9010)


def test_claude_code_spans_use_anthropic_semantics_and_session_attribute():
    body = request([span(name="claude_code.llm_request", input_tokens=7, cache_read_tokens=50000, cache_creation_tokens=800,
                         output_tokens=120, model="claude-opus-4", request_id="req_9", **{"session__id": "cc-session", "agent_id": "sub-1"})])  # fmt: skip
    result = normalise(spans_from_json(body))
    (call,) = result.calls
    assert (
        call.input_tokens,
        call.cache_read_tokens,
        call.cache_creation_tokens,
        call.context_tokens,
    ) == (7, 50000, 800, 50807)
    assert (call.session_id, call.agent_id, call.key, call.is_sidechain) == (
        "cc-session",
        "sub-1",
        "req_9",
        True,
    )
    # Claude Code's own spans belong to its session, the one its transcript and events name.
    assert call.harness == "claude-code"
    assert list(result.agents) == [("claude-code", "cc-session", "sub-1")]


def test_openinference_counts():
    body = request([span(**{"llm__token_count__prompt": 5000, "llm__token_count__prompt_details__cache_read": 4000,
                            "llm__token_count__completion": 200, "llm__model_name": "gpt-5", "session__id": "oi"})])  # fmt: skip
    (call,) = normalise(spans_from_json(body)).calls
    assert (
        call.input_tokens,
        call.cache_read_tokens,
        call.output_tokens,
        call.context_tokens,
        call.model,
    ) == (1000, 4000, 200, 5000, "gpt-5")


def test_session_falls_back_to_trace_id_and_bad_spans_are_rejected():
    body = request([
        span(**{"gen_ai__usage__input_tokens": 100, "gen_ai__usage__output_tokens": 1}),
        span(span_id="short", **{"gen_ai__usage__input_tokens": 100}),
        span(span_id="eee19b7ec3c1b175", **{"gen_ai__usage__input_tokens": "lots"}),
        span(span_id="eee19b7ec3c1b176", name="tool Read"),
    ])  # fmt: skip
    result = normalise(spans_from_json(body))
    assert [c.session_id for c in result.calls] == [TRACE]
    assert result.spans == 4 and result.ignored_spans == 1
    reasons = dict(result.rejected)
    assert "not 8 bytes" in reasons["short"]
    assert "must be a non-negative integer" in reasons["eee19b7ec3c1b175"]


def test_a_start_time_beyond_the_calendar_rejects_only_its_span():
    far = span(span_id="eee19b7ec3c1b177", **{"gen_ai__usage__input_tokens": 100})
    far["startTimeUnixNano"] = "9" * 23  # JSON numbers-as-strings need not fit a fixed64
    body = request([far, span(**{"gen_ai__usage__input_tokens": 200})])
    result = normalise(spans_from_json(body))
    assert [c.context_tokens for c in result.calls] == [200]
    assert "is not a representable time" in dict(result.rejected)["eee19b7ec3c1b177"]


def test_a_count_past_a_64_bit_sum_rejects_only_its_span():
    body = request([
        span(span_id="eee19b7ec3c1b178", **{"gen_ai__usage__input_tokens": 2**63}),
        span(**{"gen_ai__usage__input_tokens": 300}),
    ])  # fmt: skip
    result = normalise(spans_from_json(body))
    assert [c.context_tokens for c in result.calls] == [300]
    assert "not a plausible count" in dict(result.rejected)["eee19b7ec3c1b178"]


def usage_of(**attrs):
    (call,) = normalise(spans_from_json(request([span(**attrs)]))).calls
    return (call.input_tokens, call.cache_read_tokens, call.cache_creation_tokens,
            call.output_tokens, call.reasoning_tokens, call.context_tokens)  # fmt: skip


def test_current_genai_cache_write_name_is_not_fresh_input():
    current = usage_of(**{
        "gen_ai__usage__input_tokens": 12000, "gen_ai__usage__cache_read__input_tokens": 9000,
        "gen_ai__usage__cache_write__input_tokens": 2000, "gen_ai__usage__output_tokens": 300,
        "gen_ai__usage__reasoning__output_tokens": 120,
    })  # fmt: skip
    assert current == (1000, 9000, 2000, 300, 120, 12000)


def test_older_and_vendor_cache_names_mean_the_same():
    sentry = usage_of(**{
        "gen_ai__usage__input_tokens": 12000, "gen_ai__usage__input_tokens__cached": 9000,
        "gen_ai__usage__input_tokens__cache_write": 2000, "gen_ai__usage__output_tokens": 300,
        "gen_ai__usage__output_tokens__reasoning": 120,
    })  # fmt: skip
    older = usage_of(**{
        "gen_ai__usage__prompt_tokens": 12000, "gen_ai__usage__cache_read__input_tokens": 9000,
        "gen_ai__usage__cache_creation__input_tokens": 2000, "gen_ai__usage__completion_tokens": 300,
        "gen_ai__usage__reasoning__output_tokens": 120,
    })  # fmt: skip
    openinference = usage_of(**{
        "llm__token_count__prompt": 12000, "llm__token_count__prompt_details__cache_read": 9000,
        "llm__token_count__prompt_details__cache_write": 2000, "llm__token_count__completion": 300,
        "llm__token_count__completion_details__reasoning": 120,
    })  # fmt: skip
    assert sentry == older == openinference == (1000, 9000, 2000, 300, 120, 12000)


def test_provider_name_current_and_older():
    current = request([span(gen_ai__provider__name="anthropic", gen_ai__usage__input_tokens=5)])
    older = request([span(gen_ai__system="openai", gen_ai__usage__input_tokens=5)])
    assert normalise(spans_from_json(current)).calls[0].text["span"]["provider"] == "anthropic"
    assert normalise(spans_from_json(older)).calls[0].text["span"]["provider"] == "openai"


def test_conversation_compacted_marks_a_compaction():
    marked = span(span_id="eee19b7ec3c1b175", gen_ai__conversation__id="conv-7")
    marked["attributes"].append(
        {"key": "gen_ai.conversation.compacted", "value": {"boolValue": True}}
    )
    unmarked = span(gen_ai__conversation__id="conv-7")
    result = normalise(spans_from_json(request([marked, unmarked])))
    (compaction,) = result.compactions
    assert (compaction.session_id, compaction.key) == ("conv-7", f"span:{TRACE}:eee19b7ec3c1b175")
    assert result.calls == [] and result.ignored_spans == 1
