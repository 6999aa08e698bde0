from governance.navigation import NavItem

ITEMS = [
    NavItem("Traces", "Analytics", "analytics:cost", order=30),
    NavItem("Traces", "What-if calculator", "analytics:what_if", order=35),
]
