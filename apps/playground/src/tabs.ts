/**
 * Wires an ARIA tab list: click or Enter/Space selects, Left/Right/Home/End move between tabs, and only
 * the selected tab is in the tab order. `onSelect` runs whenever a tab is shown.
 */
export function setupTabs(tablist: HTMLElement, onSelect: (id: string) => void): (id: string) => void {
  const tabs = [...tablist.querySelectorAll<HTMLButtonElement>('[role="tab"]')];
  const select = (tab: HTMLButtonElement, focus: boolean) => {
    for (const other of tabs) {
      const selected = other === tab;
      other.setAttribute("aria-selected", String(selected));
      other.tabIndex = selected ? 0 : -1;
      const panel = document.getElementById(other.getAttribute("aria-controls") ?? "");
      if (panel) panel.hidden = !selected;
    }
    if (focus) tab.focus();
    onSelect(tab.dataset.tab ?? "");
  };
  for (const [index, tab] of tabs.entries()) {
    tab.addEventListener("click", () => select(tab, false));
    tab.addEventListener("keydown", (event) => {
      const last = tabs.length - 1;
      const target =
        event.key === "ArrowRight"
          ? tabs[index === last ? 0 : index + 1]
          : event.key === "ArrowLeft"
            ? tabs[index === 0 ? last : index - 1]
            : event.key === "Home"
              ? tabs[0]
              : event.key === "End"
                ? tabs[last]
                : undefined;
      if (!target) return;
      event.preventDefault();
      select(target, true);
    });
  }
  return (id: string) => {
    const tab = tabs.find((candidate) => candidate.dataset.tab === id);
    if (tab) select(tab, false);
  };
}
