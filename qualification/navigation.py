from governance.navigation import NavItem

ITEMS = [
    NavItem("Qualification", "Qualifications", "qualification:list", order=300),
    NavItem("Qualification", "Operating limits", "qualification:limit_list", order=310),
    NavItem("Qualification", "Budget audits", "qualification:audit_list", order=320),
]
