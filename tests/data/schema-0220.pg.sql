--
-- PostgreSQL database dump
--

\restrict Gev6a7OmG1RgHaULzVfPfw4vOAyp727KgCfO2s3yuATWvLd0lStFchLfONBlmxp

-- Dumped from database version 15.18 (Debian 15.18-0+deb12u1)
-- Dumped by pg_dump version 15.18 (Debian 15.18-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Name: es_field(text, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.es_field(payload text, key text) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
SELECT CASE WHEN strpos(payload, '\u') = 0 THEN (payload::json -> key)::text
            ELSE replace((regexp_replace(payload, '([^\\])((\\\\)*)\\(u0000|u[dD][89a-fA-F])', '\1\2\\/\4', 'g')::json
                          -> key)::text, '\/u', '\u') END
$$;


--
-- Name: es_importing_guard(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.es_importing_guard() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  IF EXISTS (SELECT 1 FROM events WHERE session_id = NEW.session_id)
     OR NEW.first_position IS DISTINCT FROM (SELECT coalesce(max(position), 0) + 1 FROM events) THEN
    RAISE EXCEPTION 'eventstore: importing: only an import creating a session (no events yet, first_position the next position) may hide it'
      USING ERRCODE = 'ES011';
  END IF;
  RETURN NEW;
END $$;


--
-- Name: es_json(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.es_json(payload text) RETURNS json
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
SELECT CASE WHEN strpos(payload, '\u') = 0 THEN payload::json
            ELSE regexp_replace(payload, '([^\\])((\\\\)*)\\(u0000|u[dD][89a-fA-F])', '\1\2\\/\4', 'g')::json END
$$;


--
-- Name: es_lock_head(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.es_lock_head(sid text, OUT next_seq bigint, OUT last_hash text) RETURNS record
    LANGUAGE plpgsql
    AS $$
BEGIN
  PERFORM pg_advisory_xact_lock(28555852263026292);
  SELECT e.seq + 1, e.hash INTO next_seq, last_hash FROM events AS e
   WHERE e.session_id = sid ORDER BY e.seq DESC LIMIT 1;
  IF next_seq IS NULL AND EXISTS (SELECT 1 FROM sessions WHERE id = sid) THEN
    next_seq := 0;
  END IF;
END
$$;


--
-- Name: es_search_text(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.es_search_text(payload text) RETURNS text
    LANGUAGE sql IMMUTABLE COST 5000 PARALLEL SAFE
    AS $$
SELECT concat_ws(' ',
  CASE json_typeof(j -> 'content')
    WHEN 'string' THEN j ->> 'content'
    WHEN 'array' THEN (SELECT string_agg(CASE json_typeof(c) WHEN 'string' THEN c #>> '{}' ELSE c ->> 'text' END, ' ')
                         FROM json_array_elements(j -> 'content') AS c
                        WHERE json_typeof(c) = 'string'
                           OR (json_typeof(c) = 'object' AND json_typeof(c -> 'text') = 'string'))
  END,
  CASE WHEN json_typeof(j -> 'tool_calls') = 'array' THEN
    (SELECT string_agg(concat_ws(' ', CASE WHEN json_typeof(t -> 'function') = 'object' THEN t -> 'function' ->> 'name' END,
                                      CASE WHEN json_typeof(t -> 'function') = 'object' THEN t -> 'function' ->> 'arguments' END), ' ')
       FROM json_array_elements(j -> 'tool_calls') AS t WHERE json_typeof(t) = 'object')
  END)
FROM (SELECT es_json(payload) AS j) AS p
$$;


--
-- Name: es_search_vector(text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.es_search_vector(payload text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
SELECT to_tsvector('simple'::regconfig,
                   regexp_replace(left(es_search_text(payload), 200000), '[!-/:-@[-`{-~]+', ' ', 'g'))
$$;


--
-- Name: es_usage_int(json, text); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.es_usage_int(u json, key text) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS $$
SELECT CASE WHEN json_typeof(u -> key) = 'number' THEN round((u ->> key)::numeric)::bigint END
$$;


--
-- Name: events_guard_insert(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.events_guard_insert() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
  next_seq bigint;
  next_position bigint;
  bad record;
BEGIN
  PERFORM pg_advisory_xact_lock(28555852263026292);
  SELECT e.seq + 1 INTO next_seq FROM events AS e
   WHERE e.session_id = NEW.session_id ORDER BY e.seq DESC LIMIT 1;
  IF next_seq IS NULL THEN
    IF NOT EXISTS (SELECT 1 FROM sessions WHERE id = NEW.session_id) THEN
      RAISE EXCEPTION 'eventstore: unknown session %', quote_literal(NEW.session_id) USING ERRCODE = 'ES001';
    END IF;
    next_seq := 0;
  END IF;
  IF NEW.seq IS DISTINCT FROM next_seq THEN
    RAISE EXCEPTION 'eventstore: seq % is not the next seq (%) of session %', NEW.seq, next_seq,
      quote_literal(NEW.session_id) USING ERRCODE = 'ES002';
  END IF;
  SELECT coalesce(max(e.position), 0) + 1 INTO next_position FROM events AS e;
  IF NEW.position IS NULL THEN
    NEW.position := next_position;
  ELSIF NEW.position <> next_position THEN
    RAISE EXCEPTION 'eventstore: position % is not the next position (%); leave it out', NEW.position,
      next_position USING ERRCODE = 'ES003';
  END IF;
  -- A key of the line itself (type, seq, ts), a non-string or repeated event_id: looked for
  -- only when a key could start with t, s or e (or an escape), as eventstore writes payloads.
  IF NEW.payload ~ '"[tse\\][ysev\\u]' THEN
    SELECT bool_or(key IN ('type', 'seq', 'ts')) AS line_key,
           count(*) FILTER (WHERE key = 'event_id') AS ids,
           bool_or(key = 'event_id' AND json_typeof(value) <> 'string') AS bad_id
      INTO bad FROM json_each(es_json(NEW.payload));
    IF bad.line_key OR bad.ids > 1 OR bad.bad_id THEN
      RAISE EXCEPTION 'eventstore: payload holds a key of the line itself (type, seq, ts), or an event_id that is not one string'
        USING ERRCODE = 'ES009';
    END IF;
  END IF;
  RETURN NEW;
END
$$;


--
-- Name: events_notify(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.events_notify() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  PERFORM pg_notify('eventstore_events', '');
  RETURN NULL;
END
$$;


--
-- Name: events_refuse_change(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.events_refuse_change() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  RAISE EXCEPTION 'eventstore: events are append-only: % refused', TG_OP USING ERRCODE = 'ES004';
END
$$;


--
-- Name: sessions_refuse_change(); Type: FUNCTION; Schema: public; Owner: -
--

CREATE FUNCTION public.sessions_refuse_change() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
  RAISE EXCEPTION 'eventstore: sessions are append-only: % refused', TG_OP USING ERRCODE = 'ES005';
END
$$;


SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: alembic_version; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.alembic_version (
    version_num character varying(32) NOT NULL
);


--
-- Name: events; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.events (
    "position" bigint NOT NULL,
    session_id text NOT NULL,
    seq bigint NOT NULL,
    type text NOT NULL,
    ts double precision NOT NULL,
    payload text NOT NULL,
    hash text NOT NULL,
    event_id text GENERATED ALWAYS AS ((public.es_json(payload) ->> 'event_id'::text)) STORED,
    CONSTRAINT events_hash_sha256 CHECK ((length(hash) = 64)),
    CONSTRAINT events_payload_object CHECK ((("left"(payload, 1) = '{'::text) AND (json_typeof((payload)::json) = 'object'::text))),
    CONSTRAINT events_seq_integer CHECK ((seq >= 0)),
    CONSTRAINT events_ts_finite CHECK (((ts > '-Infinity'::double precision) AND (ts < 'Infinity'::double precision))),
    CONSTRAINT events_type_text CHECK (((type <> ''::text) AND (type <> 'session/meta'::text)))
);


--
-- Name: events_search; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.events_search (
    "position" bigint NOT NULL,
    session_id text NOT NULL,
    type text NOT NULL,
    tsv tsvector NOT NULL
);


--
-- Name: events_search_state; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.events_search_state (
    id integer NOT NULL,
    indexed_through bigint NOT NULL,
    CONSTRAINT events_search_state_id_check CHECK ((id = 1))
);


--
-- Name: events_search_text; Type: VIEW; Schema: public; Owner: -
--

CREATE VIEW public.events_search_text AS
 SELECT events."position",
    events.session_id,
    events.seq,
    events.type,
    public.es_search_text(events.payload) AS text
   FROM public.events
  WHERE (events.type = ANY (ARRAY['user/message'::text, 'assistant/message'::text, 'tool/result'::text]));


--
-- Name: importing; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.importing (
    session_id text NOT NULL,
    first_position bigint NOT NULL,
    owner text NOT NULL,
    started_at double precision NOT NULL
);


--
-- Name: messages; Type: VIEW; Schema: public; Owner: -
--

CREATE VIEW public.messages AS
 SELECT e.session_id,
    e.seq,
        CASE e.type
            WHEN 'user/message'::text THEN 'user'::text
            WHEN 'assistant/message'::text THEN 'assistant'::text
            ELSE 'tool'::text
        END AS role,
        CASE e.type
            WHEN 'user/message'::text THEN COALESCE((('{"role":"user","content":'::text || f.content) || '}'::text), '{"role":"user"}'::text)
            WHEN 'assistant/message'::text THEN ((('{"role":"assistant","content":'::text || COALESCE(NULLIF(f.content, 'null'::text), '""'::text)) ||
            CASE
                WHEN ((f.tool_calls IS NULL) OR (f.tool_calls = ANY (ARRAY['null'::text, 'false'::text, '[]'::text, '""'::text]))) THEN ''::text
                WHEN (("left"(f.tool_calls, 1) = ANY (ARRAY['-'::text, '0'::text, '1'::text, '2'::text, '3'::text, '4'::text, '5'::text, '6'::text, '7'::text, '8'::text, '9'::text])) AND (abs((f.tool_calls)::numeric) < 0.0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000024703282292062328)) THEN ''::text
                ELSE (',"tool_calls":'::text || f.tool_calls)
            END) || '}'::text)
            ELSE ((('{"role":"tool"'::text || COALESCE((',"tool_call_id":'::text || f.tool_call_id), ''::text)) || COALESCE((',"content":'::text || f.content), ''::text)) || '}'::text)
        END AS message
   FROM (public.events e
     CROSS JOIN LATERAL ( SELECT public.es_field(e.payload, 'content'::text) AS content,
                CASE
                    WHEN (e.type = 'assistant/message'::text) THEN public.es_field(e.payload, 'tool_calls'::text)
                    ELSE NULL::text
                END AS tool_calls,
                CASE
                    WHEN (e.type = 'tool/result'::text) THEN public.es_field(e.payload, 'tool_call_id'::text)
                    ELSE NULL::text
                END AS tool_call_id
         OFFSET 0) f)
  WHERE (e.type = ANY (ARRAY['user/message'::text, 'assistant/message'::text, 'tool/result'::text]));


--
-- Name: sessions; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.sessions (
    id text NOT NULL,
    created_at double precision NOT NULL,
    meta text DEFAULT '{}'::text NOT NULL,
    meta_hash text,
    CONSTRAINT sessions_created_at_finite CHECK (((created_at > '-Infinity'::double precision) AND (created_at < 'Infinity'::double precision))),
    CONSTRAINT sessions_id_not_empty CHECK ((id <> ''::text)),
    CONSTRAINT sessions_meta_object CHECK ((json_typeof((meta)::json) = 'object'::text))
);


--
-- Name: session_summary; Type: VIEW; Schema: public; Owner: -
--

CREATE VIEW public.session_summary AS
 SELECT s.id AS session_id,
    ( SELECT count(*) AS count
           FROM public.events x
          WHERE (x.session_id = s.id)) AS events,
    ( SELECT count(*) AS count
           FROM public.events x
          WHERE ((x.session_id = s.id) AND (x.type = ANY (ARRAY['user/message'::text, 'assistant/message'::text, 'tool/result'::text])))) AS messages,
    ( SELECT COALESCE(sum(json_array_length((public.es_json(x.payload) -> 'tool_calls'::text))), (0)::bigint) AS "coalesce"
           FROM public.events x
          WHERE ((x.session_id = s.id) AND (x.type = ANY (ARRAY['user/message'::text, 'assistant/message'::text, 'tool/result'::text])) AND (x.type = 'assistant/message'::text) AND (json_typeof((public.es_json(x.payload) -> 'tool_calls'::text)) = 'array'::text))) AS tool_calls,
    ( SELECT x.ts
           FROM public.events x
          WHERE (x.session_id = s.id)
          ORDER BY x.seq
         LIMIT 1) AS first_ts,
    ( SELECT x.ts
           FROM public.events x
          WHERE (x.session_id = s.id)
          ORDER BY x.seq DESC
         LIMIT 1) AS last_ts
   FROM public.sessions s;


--
-- Name: tool_calls; Type: VIEW; Schema: public; Owner: -
--

CREATE VIEW public.tool_calls AS
 SELECT c.session_id,
    c.call_seq,
    (c.call ->> 'id'::text) AS call_id,
    ((c.call -> 'function'::text) ->> 'name'::text) AS name,
    ((c.call -> 'function'::text) ->> 'arguments'::text) AS arguments,
    r.seq AS result_seq,
    (public.es_json(r.payload) ->> 'content'::text) AS result,
    (round(((r.ts - c.call_ts))::numeric, 6))::double precision AS latency_s,
        CASE
            WHEN (r.seq IS NULL) THEN NULL::integer
            WHEN (((public.es_json(r.payload) -> 'is_error'::text))::text = 'true'::text) THEN 1
            ELSE 0
        END AS is_error
   FROM (( SELECT a.session_id,
            a.seq AS call_seq,
            a.ts AS call_ts,
            j.value AS call,
            ( SELECT n.seq
                   FROM public.events n
                  WHERE ((n.session_id = a.session_id) AND (n.seq > a.seq) AND (n.type = ANY (ARRAY['user/message'::text, 'assistant/message'::text, 'tool/result'::text])) AND (n.type <> 'tool/result'::text))
                  ORDER BY n.seq
                 LIMIT 1) AS next_seq
           FROM public.events a,
            LATERAL json_array_elements(
                CASE
                    WHEN (json_typeof((public.es_json(a.payload) -> 'tool_calls'::text)) = 'array'::text) THEN (public.es_json(a.payload) -> 'tool_calls'::text)
                    ELSE '[]'::json
                END) j(value)
          WHERE ((a.type = ANY (ARRAY['user/message'::text, 'assistant/message'::text, 'tool/result'::text])) AND (a.type = 'assistant/message'::text))) c
     LEFT JOIN public.events r ON (((r.session_id = c.session_id) AND (r.seq = ( SELECT x.seq
           FROM public.events x
          WHERE ((x.session_id = c.session_id) AND (x.seq > c.call_seq) AND (x.seq < COALESCE(c.next_seq, '9223372036854775807'::bigint)) AND (x.type = ANY (ARRAY['user/message'::text, 'assistant/message'::text, 'tool/result'::text])) AND (x.type = 'tool/result'::text) AND ((public.es_json(x.payload) ->> 'tool_call_id'::text) = (c.call ->> 'id'::text)))
          ORDER BY x.seq
         LIMIT 1)))));


--
-- Name: turns; Type: VIEW; Schema: public; Owner: -
--

CREATE VIEW public.turns AS
 SELECT b.session_id,
    b.start_seq,
    b.end_seq,
    b.started_at,
    e.ts AS ended_at,
    (round(((e.ts - b.started_at))::numeric, 6))::double precision AS duration_s,
    ( SELECT count(*) AS count
           FROM public.events x
          WHERE ((x.session_id = b.session_id) AND ((x.seq >= b.start_seq) AND (x.seq <= b.end_seq)) AND (x.type = 'step/start'::text))) AS steps,
    ( SELECT COALESCE(sum(json_array_length((public.es_json(x.payload) -> 'tool_calls'::text))), (0)::bigint) AS "coalesce"
           FROM public.events x
          WHERE ((x.session_id = b.session_id) AND ((x.seq >= b.start_seq) AND (x.seq <= b.end_seq)) AND (x.type = ANY (ARRAY['user/message'::text, 'assistant/message'::text, 'tool/result'::text])) AND (x.type = 'assistant/message'::text) AND (json_typeof((public.es_json(x.payload) -> 'tool_calls'::text)) = 'array'::text))) AS tool_calls,
    b.complete
   FROM (( SELECT w.session_id,
            w.seq AS start_seq,
            w.ts AS started_at,
                CASE
                    WHEN (w.next_type = 'turn/end'::text) THEN w.next_seq
                    WHEN (w.next_seq IS NOT NULL) THEN (w.next_seq - 1)
                    ELSE ( SELECT max(m.seq) AS max
                       FROM public.events m
                      WHERE (m.session_id = w.session_id))
                END AS end_seq,
            (COALESCE((w.next_type = 'turn/end'::text), false))::integer AS complete
           FROM ( SELECT events.session_id,
                    events.seq,
                    events.type,
                    events.ts,
                    lead(events.seq) OVER (PARTITION BY events.session_id ORDER BY events.seq) AS next_seq,
                    lead(events.type) OVER (PARTITION BY events.session_id ORDER BY events.seq) AS next_type
                   FROM public.events
                  WHERE (events.type = ANY (ARRAY['turn/start'::text, 'turn/end'::text]))) w
          WHERE (w.type = 'turn/start'::text)) b
     JOIN public.events e ON (((e.session_id = b.session_id) AND (e.seq = b.end_seq))));


--
-- Name: usage; Type: VIEW; Schema: public; Owner: -
--

CREATE VIEW public.usage AS
 SELECT e.session_id,
    e.seq,
    e.ts,
    e.type,
    public.es_usage_int(e.u, 'turn'::text) AS turn,
    public.es_usage_int(e.u, 'step'::text) AS step,
    (e.u ->> 'model'::text) AS model,
    COALESCE(public.es_usage_int(e.u, 'input_tokens'::text), public.es_usage_int(e.u, 'prompt_tokens'::text), (0)::bigint) AS input_tokens,
    COALESCE(public.es_usage_int(e.u, 'output_tokens'::text), public.es_usage_int(e.u, 'completion_tokens'::text), (0)::bigint) AS output_tokens,
    COALESCE(public.es_usage_int(e.u, 'cache_read_tokens'::text), (0)::bigint) AS cache_read_tokens,
    COALESCE(public.es_usage_int(e.u, 'cache_creation_tokens'::text), (0)::bigint) AS cache_creation_tokens,
    COALESCE(public.es_usage_int(e.u, 'reasoning_tokens'::text), (0)::bigint) AS reasoning_tokens
   FROM ( SELECT events.session_id,
            events.seq,
            events.ts,
            events.type,
            (public.es_json(events.payload) -> 'usage'::text) AS u
           FROM public.events
          WHERE (strpos(events.payload, '"usage":{'::text) > 0)) e
  WHERE (json_typeof(e.u) = 'object'::text);


--
-- Data for Name: alembic_version; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.alembic_version (version_num) FROM stdin;
0220
\.


--
-- Data for Name: events; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.events ("position", session_id, seq, type, ts, payload, hash) FROM stdin;
1	a0c1e2f3-111	0	turn/start	1764460800.638	{"agent":"a0c1e2f3-111"}	4e6e8feb21953d6152b86aa80cf5401fb8bee8956fbc1e4f9d18d4bf88401424
2	a0c1e2f3-111	1	user/message	1764460800.675	{"content":"List the repo and show the README"}	a7553688878fda5fdbbcd997c5d1c8c39aca93e98b19807495da918d8953d801
3	a0c1e2f3-111	2	step/start	1764460800.712	{"step":0}	7fafb247b7afa23818b4332512a3994e5a40acd47476afa7bc4aac7b7278c027
4	a0c1e2f3-111	3	assistant/message	1764460800.749	{"content":"","tool_calls":[{"id":"call_a","type":"function","function":{"name":"run_bash","arguments":"{\\"command\\":\\"ls\\"}"}},{"id":"call_b","type":"function","function":{"name":"read_file","arguments":"{\\"path\\":\\"README.md\\"}"}}]}	8bdeac3567cf3fb839bc789527f60a76fe2043d6a4a934079601434ddf108226
5	a0c1e2f3-111	4	tool/result	1764460800.869	{"tool_call_id":"call_a","content":"README.md\\nsrc\\n"}	ff2805b1cfc99f8bd86830a344063c6c15748c7078633ee17fa2edad78971322
6	a0c1e2f3-111	5	tool/result	1764460800.989	{"tool_call_id":"call_b","content":"# Demo\\n"}	0c496a0a242a2fb7e7092e9b56a058b227fc5fd4a44bbeb24ad93db25163e14a
7	a0c1e2f3-111	6	step/end	1764460801.026	{"step":0,"tool_calls":2}	fefc711d2f8b26217cf84320a24d01e910fc2a2d0344ff51bed0d64e8e6e645d
8	a0c1e2f3-111	7	step/start	1764460801.063	{"step":1}	4afc4812eccc9c250a789321f119095f219910c51d1cba27454f5966bc1ca352
9	a0c1e2f3-111	8	assistant/chunk	1764460801.068	{"delta":{"content":"The repo"}}	9579c8e5666861fabaa623a0793db2da79701281eb4b9b289b8b3d1fec2306cc
10	a0c1e2f3-111	9	assistant/chunk	1764460801.073	{"delta":{"content":" has REA"}}	ae5800c228eb8131993abe1c5669412465083fe77b95c39f13b9139d4ec41771
11	a0c1e2f3-111	10	assistant/chunk	1764460801.078	{"delta":{"content":"DME.md a"}}	62154fffb2b5e762c1aee0696c50fbf2f251aac283c0605633045607bd17989a
12	a0c1e2f3-111	11	assistant/chunk	1764460801.083	{"delta":{"content":"nd src/."}}	88e1a76f18537896145545dd6948ac0c80658d9529e15924f5106bb0f9b89723
13	a0c1e2f3-111	12	assistant/message	1764460801.12	{"content":"The repo has README.md and src/.","tool_calls":[]}	25639ecc17a701298ff54ac81c5f3c1a1ce3412325b484ef65cfeeb524120645
14	a0c1e2f3-111	13	step/end	1764460801.157	{"step":1,"tool_calls":0}	3a604bb01115517d9d6706df85bde8655e804f7349f442e662d2b4f497bf75dd
15	a0c1e2f3-111	14	turn/end	1764460801.194	{}	a584a256c2ae72cae400ba7b5dcc33610437e3e21964ba68fc531378ae67314d
16	a0c1e2f3-111	15	turn/start	1764460801.231	{"agent":"a0c1e2f3-111"}	dc373932a1febae612ab7a8f3674bad5d295b3b45c49d7e0b6eff481df08a2c9
17	a0c1e2f3-111	16	user/message	1764460801.268	{"content":"Thanks. Anything else?"}	4d51b43fbd4dce73beac2765ecd57853bd0b7650c2d655ab1653db86072e9ee3
18	a0c1e2f3-111	17	step/start	1764460801.305	{"step":0}	a460687b324761bb8b320f67ac17b322c450ca9da39cabd03c206673aedacf9e
19	a0c1e2f3-111	18	assistant/chunk	1764460801.31	{"delta":{"content":"No, that"}}	ebf26e1efae04f97971f112ea2817966d74f1c6f76acef0220b3591a4a478bcf
20	a0c1e2f3-111	19	assistant/chunk	1764460801.315	{"delta":{"content":" is all."}}	d4393388c14141b854e195cd2d2790cdb6ef36fe33b6139e8068093b98493316
21	a0c1e2f3-111	20	assistant/message	1764460801.352	{"content":"No, that is all.","tool_calls":[]}	dbc2e2f1270d9fc316efc7ac611ba59713e13da3e4502976484d1158ab0b8dbf
22	a0c1e2f3-111	21	step/end	1764460801.389	{"step":0,"tool_calls":0}	9b1346367c110d4c5ebf893d28ae8371348d60991cd2f8bd71c6d8565396cec4
23	a0c1e2f3-111	22	turn/end	1764460801.426	{}	5bf45efb733ae4549121aa7643d4b50291ac4c42311be73d6faa02ee508c7450
24	u-2026-0001	0	turn/start	1764460801.463	{"agent":"u"}	e379672076fdda1ba5326b8a5ff98ccc05c9dd809409309b6bb51da3d0aaa595
25	u-2026-0001	1	user/message	1764460801.5	{"content":"中文 emoji 😀👍🏽 é עברית \\"quotes\\" back\\\\slash </script> tab\\tnl\\ncr\\r nul\\u0000 us\\u001f del ls ps  bom﻿"}	1b44d7e05c4a796676aa8f7c5f44f3e44006aac301cd052d444689da26cbcf5e
26	u-2026-0001	2	step/start	1764460801.537	{"step":0}	3b9eceb436d53f1a7a6216fa45fb4174464bc5bb6167900ca1ec184f6f9221af
27	u-2026-0001	3	assistant/chunk	1764460801.542	{"delta":{"content":"中文 emoji 😀👍"}}	10810fbe8ac7282d3c0ec2bc98a8cea777f680a31619ce1d8e2a7d96f3b3d297
28	u-2026-0001	4	assistant/chunk	1764460801.547	{"delta":{"content":"🏽 é עברית \\""}}	35189a5878844860a4be0de277416fd20cd40b4be73910eb2b3e97ac3e32b797
29	u-2026-0001	5	assistant/chunk	1764460801.552	{"delta":{"content":"quotes\\" back\\\\"}}	930b4808c56afca6fb213c8d766e9532a65e40f94e0ff6cd4fae66bfcaee16a8
30	u-2026-0001	6	assistant/chunk	1764460801.557	{"delta":{"content":"slash </scrip"}}	1a56a6c55b38a6a697685fec8bbf45079c6cacfc76c4e9701944dec207468bd5
31	u-2026-0001	7	assistant/chunk	1764460801.562	{"delta":{"content":"t> tab\\tnl\\ncr\\r"}}	f1f75cbd25b236de703f533aca73111fe23199cfa5222208a91240ab2704e2be
32	u-2026-0001	8	assistant/chunk	1764460801.567	{"delta":{"content":" nul\\u0000 us\\u001f del"}}	54884cfd6a60c2e4e9211a5894c1b3babfb412564c444af1e4a5238947562aff
33	u-2026-0001	9	assistant/chunk	1764460801.572	{"delta":{"content":" ls ps  bom﻿"}}	7f33141f260678f473c5a690500ecb89953493b73332aec764b57a86b65b2ad0
34	u-2026-0001	10	assistant/message	1764460801.609	{"content":"中文 emoji 😀👍🏽 é עברית \\"quotes\\" back\\\\slash </script> tab\\tnl\\ncr\\r nul\\u0000 us\\u001f del ls ps  bom﻿","tool_calls":[{"id":"call_u","type":"function","function":{"name":"echo","arguments":"{\\"text\\":\\"中文 emoji 😀👍🏽 é עברית \\\\\\"quotes\\\\\\" back\\\\\\\\slash </script> tab\\\\tnl\\\\ncr\\\\r nul\\\\u0000 us\\\\u001f del ls ps  bom﻿\\"}"}}]}	edf3c03641845f0859888da4f2dd9a4b531a3c7bef2e130049291c8b6bea63f5
35	u-2026-0001	11	tool/result	1764460801.729	{"tool_call_id":"call_u","content":"中文 emoji 😀👍🏽 é עברית \\"quotes\\" back\\\\slash </script> tab\\tnl\\ncr\\r nul\\u0000 us\\u001f del ls ps  bom﻿"}	ab62a5015c992fe5d8cb9e22e3a57a8b40845ba52b98ec80e55f186e1fb9d3a9
36	u-2026-0001	12	step/end	1764460801.766	{"step":0,"tool_calls":1}	baf907269912a130ff7cac5a6509301d2920352330471e76c1dde7488ef56d8a
37	u-2026-0001	13	step/start	1764460801.803	{"step":1}	ddbc71f3435e5f3937738d963d635db0bc7080ea6c265398c445e2c8481c8f13
38	u-2026-0001	14	assistant/chunk	1764460801.808	{"delta":{"content":"完成"}}	311af19fe9f8c58da47ecfa5ca56c13e865323756d8d43f92974b446b29cd2dd
39	u-2026-0001	15	assistant/chunk	1764460801.813	{"delta":{"content":" ✅"}}	b1e884fce3efcb875ad1e869068af0a78ab5a1046f14f7a1aafed211f880e6e5
40	u-2026-0001	16	assistant/message	1764460801.85	{"content":"完成 ✅","tool_calls":[]}	f9820e204a3314c9148a63aca5379d4baa3d118681cd68d74520b95adfc7238e
41	u-2026-0001	17	step/end	1764460801.887	{"step":1,"tool_calls":0}	74031ca4dc5dd701929ae0601706e6cdb2492f90ebb2692ea590b3292120f4d1
42	u-2026-0001	18	turn/end	1764460801.924	{}	7f05875a0f814e8663805c32c26efa33e42547136425471e17d80d3038fca641
43	extra-0001	0	turn/start	1764460802.22	{"agent":"x","model":"some-model","config":{"temperature":0.2,"stop":["\\n\\n"]}}	a2421f98880e5ba70560686d47bf78e1725cc2407ff557ce9fa0a65f9724ef4f
44	extra-0001	1	skill/inject	1764460802.257	{"name":"git","content":"You can use git."}	cfca9957f40d78f84c9d954620715413019a968f7a97aee92ec6befad708d77b
45	extra-0001	2	user/message	1764460802.294	{"content":"hi","attachments":[],"meta":{"source":"cli","tags":["a","b"]}}	ef75c2e91cc5c0d505d6d1e7ac0d17d5d324e67ab00da74418d1879e2342130e
46	extra-0001	3	assistant/message	1764460802.331	{"content":"hello","tool_calls":[],"model":"some-model","usage":{"prompt_tokens":12,"completion_tokens":3},"finish_reason":"stop"}	0b275a1bc6d4fa54a703116257f2a69259aba2884fd8e75de62014ffddcf69a9
47	extra-0001	4	context/compact	1764460802.368	{"summary":"greeting","dropped":[0,1]}	3bbef5090a797a00956b16430dc5d4e4e3fb24cedd1d951ed7800c744e3b1122
48	extra-0001	5	turn/end	1764460802.405	{"reason":"done","weird key":1,"":"empty key","ünï":true}	af099c84d06940e9643c576000d11dda7f3ef2ac4bb8e34a8afe7f8c4cc63f0b
49	11111111-2222-3333-4444-555555555555	0	turn/start	1767225600	{"turn":1,"event_id":"u1:turn-start"}	f66a6db9c9fdc04941ef336660853364195f5e258b1cb6dd7f8f33da0685d1c6
50	11111111-2222-3333-4444-555555555555	1	user/message	1767225600	{"content":"list two dirs","source":{"userType":"external","isSidechain":false,"uuid":"u1","parentUuid":null},"event_id":"u1"}	ce0744ee44033d4127b4c6f3e43809f8bd27b10a14180b3b5975166ba552b200
51	11111111-2222-3333-4444-555555555555	2	step/start	1767225601	{"step":1,"event_id":"a1:step-start"}	8cb690ebdd8eed3225d9425fd4e42fc6a39faff1684ef2842f8f83f1f4f8e96b
52	11111111-2222-3333-4444-555555555555	3	session/info	1767225601	{"info":{"model":"claude-x"},"event_id":"a1:model"}	47742331af7120b96102397eb499f2633d5e38e92d4ca018d7c231cb74230f47
53	11111111-2222-3333-4444-555555555555	4	assistant/message	1767225601	{"content":"","tool_calls":[{"id":"toolu_A","type":"function","function":{"name":"Bash","arguments":"{\\"command\\": \\"ls a\\"}"}}],"model":"claude-x","usage":{"turn":1,"step":1,"model":"claude-x","input_tokens":3,"output_tokens":5,"cache_read_tokens":0,"cache_creation_tokens":0},"source":{"userType":"external","isSidechain":false,"uuid":"a1","parentUuid":"u1","requestId":"req_1","message":{"id":"msg_M","type":"message","role":"assistant","model":"claude-x","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":5,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}}},"message_id":"msg_M","event_id":"a1"}	a5d1acd2898075f51e57afe8aa254c26bd2c6854355e36b2e94c224e88962c34
54	11111111-2222-3333-4444-555555555555	5	tool/result	1767225602	{"tool_call_id":"toolu_A","content":"ok","is_error":false,"source":{"userType":"external","isSidechain":false,"uuid":"r1","parentUuid":"a1"},"event_id":"r1:toolu_A"}	c79b36614a0eb8db8697e13bab2af53a4c38f0dbc93798aa8da4dbac336bf218
55	11111111-2222-3333-4444-555555555555	6	assistant/part	1767225603	{"tool_calls":[{"id":"toolu_B","type":"function","function":{"name":"Bash","arguments":"{\\"command\\": \\"ls b\\"}"}}],"source":{"userType":"external","isSidechain":false,"uuid":"a2","parentUuid":"r1","requestId":"req_1","message":{"id":"msg_M","type":"message","role":"assistant","model":"claude-x","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":5,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}}},"message_id":"msg_M","event_id":"a2"}	f2b7ba4e222d16de915f114d0da9914c509586835ea4d3033e4200a5f23fdbe1
56	11111111-2222-3333-4444-555555555555	7	tool/result	1767225604	{"tool_call_id":"toolu_B","content":"ok","is_error":false,"source":{"userType":"external","isSidechain":false,"uuid":"r2","parentUuid":"a2"},"event_id":"r2:toolu_B"}	4b1e856ee4cbb40b9d0742e751875b3b1ebb8053032d352d6df0c74b4c94d2ea
57	11111111-2222-3333-4444-555555555555	8	step/end	1767225605	{"step":1,"tool_calls":2,"event_id":"a3:step-end"}	36c01d01c95ae1d11d2853d9a868371fb6eb8d9c67afbf5aef057114e28e1c9e
58	11111111-2222-3333-4444-555555555555	9	step/start	1767225605	{"step":2,"event_id":"a3:step-start"}	0662efe82efbf86fa5b99ce89828fbed40771c983e250ec1c3b13faf3ffd13e5
59	11111111-2222-3333-4444-555555555555	10	assistant/message	1767225605	{"content":"done","model":"claude-x","usage":{"turn":1,"step":2,"model":"claude-x","input_tokens":3,"output_tokens":5,"cache_read_tokens":0,"cache_creation_tokens":0},"source":{"userType":"external","isSidechain":false,"uuid":"a3","parentUuid":"r2","requestId":"req_1","message":{"id":"msg_N","type":"message","role":"assistant","model":"claude-x","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":5,"cache_read_input_tokens":0,"cache_creation_input_tokens":0}}},"message_id":"msg_N","event_id":"a3"}	f68cd6411b581c2286ee2d24ef7a6c3eb19e9733fb52ce4d7bde391fe07bd3e0
60	0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000	0	codex/session_meta	1767225600	{"source":{"id":"0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000","timestamp":"2026-01-01T00:00:00Z","cwd":"/home/dev/project","originator":"x","cli_version":"0.40.0"},"event_id":"L1"}	4f3174025a54f622d3f848f93e717e64b358b5cc2310812251426ea20ebfd8a8
61	0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000	1	turn/start	1767225601	{"turn":1,"event_id":"L2:turn-start"}	50f5a9acb946be6a53e7331493b5f564cf2d49b22a472647cfa03dd49275819d
62	0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000	2	user/message	1767225601	{"content":"hi","event_id":"L2"}	69c8530680ca6d62889621cf25672eec6838271b224ee3063b6ca41944fc6d44
63	0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000	3	codex/user_message	1767225601	{"source":{"message":"hi","kind":"plain"},"event_id":"L3"}	1cf4750f278f1a7da0e6c43f4549669c4e63a9f367ca4cd9bad14a6ee354a455
64	0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000	4	step/start	1767225601.1	{"step":1,"event_id":"L4:step-start"}	9b1f0f3ef2577ccdf23c5ad615c180676002cbebe6d2ca968a1a65b6434d592b
65	0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000	5	session/info	1767225601.1	{"info":{"model":"gpt-x"},"event_id":"L4:info"}	b06fb092ff66d3864c0cb7b1e3939c7fcab4c4548c63493ac7d18b0c53c10984
66	0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000	6	codex/turn_context	1767225601.1	{"source":{"cwd":"/home/dev/project","model":"gpt-x"},"event_id":"L4"}	da63fb472ac56a6823fb78fcf4d8440c4527b70cc7729ce087af3e0da09f0180
67	0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000	7	codex/token_count	1767225602	{"usage":{"turn":1,"step":1,"model":"gpt-x","input_tokens":200,"output_tokens":50,"cache_read_tokens":800,"cache_creation_tokens":0,"reasoning_tokens":0},"source":{"info":{"total_token_usage":{"input_tokens":1000,"cached_input_tokens":800,"output_tokens":50,"reasoning_output_tokens":0,"total_tokens":1050},"last_token_usage":{"input_tokens":1000,"cached_input_tokens":800,"output_tokens":50,"reasoning_output_tokens":0,"total_tokens":1050},"model_context_window":1000}},"event_id":"L5"}	29ccfdb3eb18c8c3bada13683b799302f355d0392615a3d9517257383beb7d8f
68	0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000	8	assistant/message	1767225602.1	{"content":"hello","model":"gpt-x","message_id":"L6","event_id":"L6"}	8de0333b40d683d9c16bc2a4f278fb5f7ac8444784b96981e7922863b6e7d480
69	0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000	9	step/end	1767226200	{"step":1,"tool_calls":0,"event_id":"L7:step-end"}	2c56300bc272e44e6db230568d591f7f515d11a20746c89772ce1875bae22eb1
70	0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000	10	turn/end	1767226200	{"turn":1,"event_id":"L7:turn-end"}	ca02d8b85c69421d0c4e291034df6307d53cd6db2f52f6c88c93f20e8f90d2db
71	0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000	11	turn/start	1767226200	{"turn":2,"event_id":"L7:turn-start"}	3d127330e51d87da358d4495f443ef08a4efdb8b8df8afd57bbffc67c6ec6af2
72	0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000	12	user/message	1767226200	{"content":"again","event_id":"L7"}	0a6d6ac01c1e214095909cec808c06a6c001c1d8dce69820aa8f92a631b8a52e
73	0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000	13	codex/user_message	1767226200	{"source":{"message":"again","kind":"plain"},"event_id":"L8"}	2ce5f26df40b18a332bf60f5c12b1f6b347ed2b78b5cdbb49eea94cc2f9a488a
74	0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000	14	step/start	1767226200.1	{"step":1,"event_id":"L9:step-start"}	6b75199365725b244c27e633fa3b6b6f21950a2ea2c175c595a2622f835aa8a9
75	0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000	15	codex/turn_context	1767226200.1	{"source":{"cwd":"/home/dev/project","model":"gpt-x"},"event_id":"L9"}	f3284727489d851012941952fbabc9d1060d37620caf1f6a3e05db4b2f9f5f31
76	0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000	16	codex/token_count	1767226201	{"counter_restart":true,"usage":{"turn":2,"step":1,"model":"gpt-x","input_tokens":200,"output_tokens":10,"cache_read_tokens":100,"cache_creation_tokens":0,"reasoning_tokens":0},"source":{"info":{"total_token_usage":{"input_tokens":300,"cached_input_tokens":100,"output_tokens":10,"reasoning_output_tokens":0,"total_tokens":310},"last_token_usage":{"input_tokens":300,"cached_input_tokens":100,"output_tokens":10,"reasoning_output_tokens":0,"total_tokens":310},"model_context_window":1000}},"event_id":"L10"}	f96bc711f8c6ed1ea8561fb991303e374fcdc155177f7548fc9d886da443d9b4
77	0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000	17	assistant/message	1767226201.1	{"content":"hello again","model":"gpt-x","message_id":"L11","event_id":"L11"}	724555f92bbc41a25e8cc65ddbf3580d99dd6c75268b1c186f0da512db6eff3c
\.


--
-- Data for Name: events_search; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.events_search ("position", session_id, type, tsv) FROM stdin;
\.


--
-- Data for Name: events_search_state; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.events_search_state (id, indexed_through) FROM stdin;
1	0
\.


--
-- Data for Name: importing; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.importing (session_id, first_position, owner, started_at) FROM stdin;
\.


--
-- Data for Name: sessions; Type: TABLE DATA; Schema: public; Owner: -
--

COPY public.sessions (id, created_at, meta, meta_hash) FROM stdin;
a0c1e2f3-111	1796613585.4070916	{}	ca5ac09212f66a1ce35d3a9be4b091c5f0c4f576e9a42269a6fb89c86f0463dd
u-2026-0001	1796613585.409348	{}	481eeb87eac4e39ee15a5b60590ed199f3e30ad7ab1eb03417d548185df0d0fd
extra-0001	1796613585.410663	{}	3d34e540291192538fa3b2a9f6abda858d2d680a03833fbc355f875cd4c68ea6
11111111-2222-3333-4444-555555555555	1796613585.4120886	{"source":"claude-code","source_file":"/work/shared/transcripts/claude-code/v2.1-interleaved-results.jsonl","source_session_id":"11111111-2222-3333-4444-555555555555","cwd":"/home/dev/project","version":"2.1.39"}	14b2ee9c3e837d1c011cbd05c44ba36bd6d5b4abb984463347d26ca55c447e1e
0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000	1796613585.4141314	{"source":"codex","source_file":"/work/shared/transcripts/codex/rollout-0.40-counter-reset.jsonl","cwd":"/home/dev/project","originator":"x","version":"0.40.0"}	db48d5b469a63bd35f2f6cd4f9474e75de258c95e94bc3ddbc54aed8aff493ff
\.


--
-- Name: alembic_version alembic_version_pkc; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.alembic_version
    ADD CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num);


--
-- Name: events events_key; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.events
    ADD CONSTRAINT events_key UNIQUE (session_id, seq);


--
-- Name: events events_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.events
    ADD CONSTRAINT events_pkey PRIMARY KEY ("position");


--
-- Name: events_search events_search_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.events_search
    ADD CONSTRAINT events_search_pkey PRIMARY KEY ("position");


--
-- Name: events_search_state events_search_state_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.events_search_state
    ADD CONSTRAINT events_search_state_pkey PRIMARY KEY (id);


--
-- Name: importing importing_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.importing
    ADD CONSTRAINT importing_pkey PRIMARY KEY (session_id);


--
-- Name: sessions sessions_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.sessions
    ADD CONSTRAINT sessions_pkey PRIMARY KEY (id);


--
-- Name: events_messages; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX events_messages ON public.events USING btree (session_id, seq) WHERE (type = ANY (ARRAY['user/message'::text, 'assistant/message'::text, 'tool/result'::text]));


--
-- Name: events_search_session; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX events_search_session ON public.events_search USING btree (session_id, "position");


--
-- Name: events_search_tsv; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX events_search_tsv ON public.events_search USING gin (tsv);


--
-- Name: events_session_event_id; Type: INDEX; Schema: public; Owner: -
--

CREATE UNIQUE INDEX events_session_event_id ON public.events USING btree (session_id, event_id) WHERE (event_id IS NOT NULL);


--
-- Name: events events_guard_delete; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER events_guard_delete BEFORE DELETE ON public.events FOR EACH ROW EXECUTE FUNCTION public.events_refuse_change();


--
-- Name: events events_guard_insert; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER events_guard_insert BEFORE INSERT ON public.events FOR EACH ROW EXECUTE FUNCTION public.events_guard_insert();


--
-- Name: events events_guard_truncate; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER events_guard_truncate BEFORE TRUNCATE ON public.events FOR EACH STATEMENT EXECUTE FUNCTION public.events_refuse_change();


--
-- Name: events events_guard_update; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER events_guard_update BEFORE UPDATE ON public.events FOR EACH ROW EXECUTE FUNCTION public.events_refuse_change();


--
-- Name: events events_notify; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER events_notify AFTER INSERT ON public.events FOR EACH STATEMENT EXECUTE FUNCTION public.events_notify();


--
-- Name: importing importing_guard_insert; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER importing_guard_insert BEFORE INSERT ON public.importing FOR EACH ROW EXECUTE FUNCTION public.es_importing_guard();


--
-- Name: sessions sessions_guard_delete; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sessions_guard_delete BEFORE DELETE ON public.sessions FOR EACH ROW EXECUTE FUNCTION public.sessions_refuse_change();


--
-- Name: sessions sessions_guard_truncate; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sessions_guard_truncate BEFORE TRUNCATE ON public.sessions FOR EACH STATEMENT EXECUTE FUNCTION public.sessions_refuse_change();


--
-- Name: sessions sessions_guard_update; Type: TRIGGER; Schema: public; Owner: -
--

CREATE TRIGGER sessions_guard_update BEFORE UPDATE ON public.sessions FOR EACH ROW EXECUTE FUNCTION public.sessions_refuse_change();


--
-- Name: events events_session_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.events
    ADD CONSTRAINT events_session_fkey FOREIGN KEY (session_id) REFERENCES public.sessions(id);


--
-- Name: importing importing_session_id_fkey; Type: FK CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.importing
    ADD CONSTRAINT importing_session_id_fkey FOREIGN KEY (session_id) REFERENCES public.sessions(id);


--
-- PostgreSQL database dump complete
--

\unrestrict Gev6a7OmG1RgHaULzVfPfw4vOAyp727KgCfO2s3yuATWvLd0lStFchLfONBlmxp

