"""Tool search over a catalogue of 10,000 tools: registry open, ranked search latency and recall@5.

The catalogue: the real tools of the MCP test servers (started as processes and listed) and of httpbin's
own OpenAPI document (read from the httpbin package, imported as `api` tools), topped up to 10,000 with
generated SaaS-style tools (`<provider>_<action>_<resource>`, descriptions with the usual synonyms). All
are stored in one folder; the figures are the folder's open, the first ranked search (which builds the
index), the median search, and recall@5 on the 100 queries below, written from the tools' descriptions
(75 for generated tools, 25 for real ones), each with the tool it should find.
Targets: open < 1 s, search p50 < 5 ms, recall@5 >= 0.9.
Run: .venv/bin/python bench/bench_search.py
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from echo_tools import EgressPolicy, ToolRegistry  # noqa: E402
from echo_tools.models import ToolDef  # noqa: E402

TOTAL = 10_000
MCP_SERVERS = ("calc", "content", "paged", "tasks")
PROVIDERS = (
    "briveler mezoex raoex mekaly mezoer mpzoly zoroer mefen vafen fenfener meva rovelio mpvelex rafenio "
    "rotix fenfenly oraex zofen dynnoer rompio lufener oillly tixva fenillex menbrier illdyn rakaer "
    "tixbrily menmp zoroex bribriio dynmenex luzo qumen meillex luiller oacer otixex ramen noillly vastaer "
    "menzoly lustaex quveler roquer ostaly velzoly velvaly acmenex tixquio acveler rooex fenbrily kadyn "
    "luroer stastaer ramener meno noluly rabriex mera fenvelex aczoly dynstaly quoex omen menmenio zovel "
    "briquer tixka nokaio velro kaill qukaio tixoly roroex brivaex novaer vanoex acquer qunoex oluio ozoly "
    "ravaer nobrily mendynex acmenio zoraer nomenly mpbri staluer zotixly velacly fenluly dyndyner ovelex "
    "rovel acraex velmply noacio"
).split()
RESOURCES = (
    "contact invoice deal ticket order customer product shipment subscription payment refund campaign "
    "lead meeting document project task employee vendor coupon"
).split()
ACTIONS = {
    "create": "Create (add) a new {r} record in {P}.",
    "get": "Get (fetch, look up) one {r} from {P} by its id.",
    "update": "Update (change, edit) the fields of an existing {r} in {P}.",
    "delete": "Delete (remove) a {r} from {P} permanently.",
    "list": "List (browse, page through) every {r} stored in {P}.",
}
# (query, the tool it should find), written from the descriptions
QUERIES = [
    ("browse all documents in Menmp", "gen_menmp_list_document"),
    ("browse all vendors in Menmp", "gen_menmp_list_vendor"),
    ("look up a task in Mpvelex by id", "gen_mpvelex_get_task"),
    ("browse all customers in Bribriio", "gen_bribriio_list_customer"),
    ("remove a payment from Zoroer", "gen_zoroer_delete_payment"),
    ("add a employee to Fenfener", "gen_fenfener_create_employee"),
    ("add a coupon to Rooex", "gen_rooex_create_coupon"),
    ("remove a coupon from Illdyn", "gen_illdyn_delete_coupon"),
    ("look up a coupon in Menzoly by id", "gen_menzoly_get_coupon"),
    ("browse all deals in Briveler", "gen_briveler_list_deal"),
    ("add a product to Mekaly", "gen_mekaly_create_product"),
    ("look up a coupon in Ramener by id", "gen_ramener_get_coupon"),
    ("remove a refund from Mezoex", "gen_mezoex_delete_refund"),
    ("browse all products in Menmp", "gen_menmp_list_product"),
    ("look up a payment in Qumen by id", "gen_qumen_get_payment"),
    ("add a deal to Dynmenex", "gen_dynmenex_create_deal"),
    ("edit an existing meeting in Zoroex", "gen_zoroex_update_meeting"),
    ("add a subscription to Luiller", "gen_luiller_create_subscription"),
    ("look up a task in Lufener by id", "gen_lufener_get_task"),
    ("add a deal to Dynnoer", "gen_dynnoer_create_deal"),
    ("add a lead to Oacer", "gen_oacer_create_lead"),
    ("edit an existing lead in Zoroer", "gen_zoroer_update_lead"),
    ("add a contact to Mezoer", "gen_mezoer_create_contact"),
    ("look up a invoice in Rafenio by id", "gen_rafenio_get_invoice"),
    ("remove a lead from Bribriio", "gen_bribriio_delete_lead"),
    ("add a vendor to Rakaer", "gen_rakaer_create_vendor"),
    ("look up a subscription in Vastaer by id", "gen_vastaer_get_subscription"),
    ("add a payment to Oillly", "gen_oillly_create_payment"),
    ("add a meeting to Oillly", "gen_oillly_create_meeting"),
    ("add a order to Acmenex", "gen_acmenex_create_order"),
    ("add a contact to Fenfenly", "gen_fenfenly_create_contact"),
    ("remove a project from Mekaly", "gen_mekaly_delete_project"),
    ("browse all products in Rovelio", "gen_rovelio_list_product"),
    ("browse all products in Menmp", "gen_menmp_list_product"),
    ("look up a meeting in Velzoly by id", "gen_velzoly_get_meeting"),
    ("remove a ticket from Menzoly", "gen_menzoly_delete_ticket"),
    ("remove a product from Illdyn", "gen_illdyn_delete_product"),
    ("edit an existing vendor in Briveler", "gen_briveler_update_vendor"),
    ("add a product to Rompio", "gen_rompio_create_product"),
    ("remove a coupon from Rovelio", "gen_rovelio_delete_coupon"),
    ("browse all tickets in Menzoly", "gen_menzoly_list_ticket"),
    ("look up a product in Raoex by id", "gen_raoex_get_product"),
    ("edit an existing contact in Menmp", "gen_menmp_update_contact"),
    ("browse all refunds in Tixquio", "gen_tixquio_list_refund"),
    ("edit an existing lead in Kadyn", "gen_kadyn_update_lead"),
    ("add a deal to Mezoer", "gen_mezoer_create_deal"),
    ("browse all shipments in Rafenio", "gen_rafenio_list_shipment"),
    ("browse all campaigns in Briveler", "gen_briveler_list_campaign"),
    ("browse all documents in Fenillex", "gen_fenillex_list_document"),
    ("browse all projects in Vafen", "gen_vafen_list_project"),
    ("browse all orders in Kadyn", "gen_kadyn_list_order"),
    ("remove a customer from Stastaer", "gen_stastaer_delete_customer"),
    ("look up a payment in Vastaer by id", "gen_vastaer_get_payment"),
    ("look up a coupon in Noluly by id", "gen_noluly_get_coupon"),
    ("look up a customer in Fenfenly by id", "gen_fenfenly_get_customer"),
    ("browse all products in Velvaly", "gen_velvaly_list_product"),
    ("remove a project from Quveler", "gen_quveler_delete_project"),
    ("add a meeting to Ramen", "gen_ramen_create_meeting"),
    ("add a ticket to Mekaly", "gen_mekaly_create_ticket"),
    ("browse all subscriptions in Raoex", "gen_raoex_list_subscription"),
    ("remove a subscription from Fenfenly", "gen_fenfenly_delete_subscription"),
    ("browse all projects in Rakaer", "gen_rakaer_list_project"),
    ("browse all customers in Dynnoer", "gen_dynnoer_list_customer"),
    ("add a order to Rabriex", "gen_rabriex_create_order"),
    ("remove a employee from Rotix", "gen_rotix_delete_employee"),
    ("browse all coupons in Menzoly", "gen_menzoly_list_coupon"),
    ("edit an existing product in Mezoer", "gen_mezoer_update_product"),
    ("look up a contact in Noluly by id", "gen_noluly_get_contact"),
    ("edit an existing meeting in Mezoer", "gen_mezoer_update_meeting"),
    ("look up a invoice in Menmp by id", "gen_menmp_get_invoice"),
    ("look up a payment in Raoex by id", "gen_raoex_get_payment"),
    ("browse all vendors in Fenillex", "gen_fenillex_list_vendor"),
    ("add a campaign to Vafen", "gen_vafen_create_campaign"),
    ("remove a refund from Vafen", "gen_vafen_delete_refund"),
    ("browse all vendors in Lustaex", "gen_lustaex_list_vendor"),
    ("decode a base64url string", "httpbin_get_base64_value"),
    ("what is my IP address", "httpbin_get_ip"),
    ("return a UUID4", "httpbin_get_uuid"),
    ("show the request's user agent header", "httpbin_get_user_agent"),
    ("return a simple PNG image", "httpbin_get_image_png"),
    ("gzip encoded data", "httpbin_get_gzip"),
    ("brotli encoded response", "httpbin_get_brotli"),
    ("robots.txt rules", "httpbin_get_robots_txt"),
    ("a simple XML document", "httpbin_get_xml"),
    ("a simple HTML document", "httpbin_get_html"),
    ("set a cookie by name and value and redirect", "httpbin_get_cookies_set_name_value"),
    ("delete cookies given in the query string", "httpbin_get_cookies_delete"),
    ("prompt for HTTP basic auth", "httpbin_get_basic_auth_user_passwd"),
    ("bearer authentication", "httpbin_get_bearer"),
    ("drip data over a duration", "httpbin_get_drip"),
    ("the incoming request's HTTP headers", "httpbin_get_headers"),
    ("a UTF-8 encoded body", "httpbin_get_encoding_utf8"),
    ("deflate encoded data", "httpbin_get_deflate"),
    ("count total and mean of a list of numbers", "mcp_calc_stats"),
    ("read a resource of the MCP server by its URI", "mcp_content_read_resource"),
    ("get a prompt of the server with its arguments filled in", "mcp_content_get_prompt"),
    ("an audio clip", "mcp_content_sound"),
    ("the server's process id", "mcp_calc_pid"),
    ("report progress at each step", "mcp_content_slow_job"),
    ("environment variable of the server process", "mcp_calc_env_value"),
]


def real_tools() -> list[ToolDef]:
    """The MCP test servers' tools (real processes) and httpbin's OpenAPI operations."""
    from echo_tools.openapi import import_openapi_report

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from httpbin import app

    registry = ToolRegistry(egress=EgressPolicy.local())
    spec = json.loads(app.test_client().get("/spec.json").data)
    import_openapi_report(registry, spec, provider="httpbin", base_url="http://127.0.0.1:9")
    servers = ROOT / "tests" / "echo_tools" / "mcp_servers"
    for name in MCP_SERVERS:
        registry.add_mcp_server(
            name, {"command": sys.executable, "args": [str(servers / f"{name}_server.py")]}
        )
    return registry.list_all()


def generated(count: int) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for provider in PROVIDERS:
        for resource in RESOURCES:
            for action, text in ACTIONS.items():
                out.append(
                    {
                        "tool_id": f"gen_{provider}_{action}_{resource}",
                        "name": f"{provider}_{action}_{resource}",
                        "description": text.format(r=resource, P=provider.title()),
                        "tool_type": "mcp",
                        "execution_config": {"server": provider, "tool": f"{action}_{resource}"},
                        "tags": [f"provider:{provider}"],
                        "capabilities": [f"{action}_{resource}"],
                        "source": "mcp",
                    }
                )
    return out[:count]


def main() -> None:
    real = real_tools()
    tools: list[ToolDef | dict[str, object]] = [*real, *generated(TOTAL - len(real))]
    with tempfile.TemporaryDirectory() as folder:
        ToolRegistry(storage_dir=folder, egress=EgressPolicy.local()).register_many(tools)
        started = time.perf_counter()
        registry = ToolRegistry(storage_dir=folder)
        open_s = time.perf_counter() - started
        assert len(registry) == TOTAL, len(registry)
        started = time.perf_counter()
        registry.search("warm up", k=5)
        index_s = time.perf_counter() - started
        samples, hits, misses = [], 0, []
        for query, expected in QUERIES:
            started = time.perf_counter()
            found = [t.tool_id for t in registry.search(query, k=5)]
            samples.append(time.perf_counter() - started)
            if expected in found:
                hits += 1
            else:
                misses.append((query, expected, found[:3]))
    recall = hits / len(QUERIES)
    print(f"catalogue: {TOTAL} tools ({len(real)} real: MCP test servers and httpbin's OpenAPI)")
    print(f"registry open:            {open_s * 1000:8.1f} ms   (target < 1000 ms)")
    print(f"first search (index):     {index_s * 1000:8.1f} ms")
    print(f"search p50:               {statistics.median(samples) * 1000:8.2f} ms   (target < 5 ms)")
    print(f"search max:               {max(samples) * 1000:8.2f} ms")
    print(f"recall@5:                 {recall:8.2f}      (target >= 0.9, {len(QUERIES)} queries)")
    for query, expected, found in misses:
        print(f"  missed: {query!r} -> {expected} (top 3: {found})")


if __name__ == "__main__":
    main()
