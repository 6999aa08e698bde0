from governance.navigation import NavItem

ITEMS = [
    NavItem("Traces", "Prices", "pricing:price_table", order=48),
    NavItem("Traces", "Cost by agent", "pricing:subagent_cost", order=49),
]
