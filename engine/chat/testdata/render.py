#!/usr/bin/env python3
"""Render the chat-template test cases with Python's jinja2, as Hugging Face's
apply_chat_template does, into golden/ (run by hand after changing a case:
python3 engine/chat/testdata/render.py). Go tests compare lloyal's renders
with these files, and re-render live when jinja2 is importable.

render.py --serve answers one JSON request a line on stdin with one JSON reply
a line on stdout, so a Go test or fuzz target pays for one Python process, not
one per render. A request is {"template", "messages", "tools", "think", "bos",
"eos", "add_generation_prompt"} (a chat render, as apply_chat_template does
it) or {"template", "context"} (the template rendered with exactly that
context: the differential fuzz target). The reply is {"text": RENDER} or
{"error": "ExceptionType: message"}."""
import json, os, sys
from datetime import datetime
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.exceptions import TemplateError

HERE = os.path.dirname(os.path.abspath(__file__))

def raise_exception(message):
    raise TemplateError(message)

def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

def strftime_now(fmt):
    return datetime.now().strftime(fmt)

class Generation(Extension):
    """{% generation %}…{% endgeneration %} as Hugging Face's AssistantTracker
    renders it: the body, unchanged."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body, lineno=lineno)

def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env

def render(template, messages, tools=None, think="auto", bos="", eos="", add_generation_prompt=True):
    kw = dict(messages=messages, tools=tools, add_generation_prompt=add_generation_prompt, bos_token=bos, eos_token=eos)
    if think == "on":
        kw["enable_thinking"] = True
    elif think == "off":
        kw["enable_thinking"] = False
    return environment().from_string(template).render(**kw)

def serve():
    for line in sys.stdin:
        req = json.loads(line)
        try:
            if "context" in req:
                text = environment().from_string(req["template"]).render(**req["context"])
            else:
                text = render(req["template"], req["messages"], req.get("tools"), req.get("think", "auto"),
                              req.get("bos", ""), req.get("eos", ""), req.get("add_generation_prompt", True))
            reply = {"text": text}
        except Exception as e:  # every failure is a reply: the Go side compares errors too
            reply = {"error": "%s: %s" % (type(e).__name__, e)}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()

def load(rel):
    with open(os.path.join(HERE, rel), encoding="utf-8") as f:
        return f.read() if rel.endswith(".jinja") else json.load(f)

def main():
    if sys.argv[1:] == ["--serve"]:
        serve()
        return
    if len(sys.argv) == 5 or len(sys.argv) == 6:
        # render.py TEMPLATE MESSAGES TOOLS|- THINK [BOS,EOS]: print one render (used by the live test).
        with open(sys.argv[1], encoding="utf-8") as f:
            tpl = f.read()
        with open(sys.argv[2], encoding="utf-8") as f:
            msgs = json.load(f)
        tools = None
        if sys.argv[3] != "-":
            with open(sys.argv[3], encoding="utf-8") as f:
                tools = json.load(f)
        bos, eos = (sys.argv[5].split(",", 1) + [""])[:2] if len(sys.argv) == 6 else ("", "")
        sys.stdout.write(render(tpl, msgs, tools, sys.argv[4], bos, eos))
        return
    cases = load("cases.json")
    os.makedirs(os.path.join(HERE, "golden"), exist_ok=True)
    for c in cases["cases"]:
        t = c["template"]
        out = render(load("templates/%s.jinja" % t), load("conversations/%s.json" % c["messages"]),
                     load("conversations/%s.json" % c["tools"]) if c.get("tools") else None,
                     c["think"], cases["bos"].get(t, ""), cases["eos"].get(t, ""))
        name = "golden/%s.%s.%s.txt" % (t, c["messages"], c["think"])
        with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
            f.write(out)
        print("wrote", name)

if __name__ == "__main__":
    main()
