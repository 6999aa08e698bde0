from governance.navigation import NavItem

ITEMS = [NavItem("Traces", "Prices", "pricing:price_table", order=48)]
