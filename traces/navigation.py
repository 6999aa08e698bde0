from governance.models import Role
from governance.navigation import NavItem

ITEMS = [
    NavItem("Traces", "Sessions", "traces:session_list", order=10),
    NavItem("Traces", "Upload traces", "traces:upload", order=20, min_role=Role.EDITOR),
    NavItem("Traces", "Sources compared", "traces:reconciliation", order=25),
    NavItem("Traces", "Telemetry settings", "traces:telemetry_settings", order=30),
    NavItem("Traces", "Hook policy", "traces:hook_settings", order=40),
]
