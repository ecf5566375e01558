/** A child of {@link h}: a node, or text (always a text node, never parsed as HTML). */
export type Child = Node | string | false | null | undefined;

/** Attributes of {@link h}: set with `setAttribute` (`true`: present, `false`: absent). */
export type Attributes = Record<string, string | number | boolean | undefined>;

/**
 * Makes an element with attributes and children. User text only ever
 * becomes text nodes and attribute values: there is no way to pass HTML
 * (and the page's Trusted Types policy makes any HTML sink throw).
 */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Attributes = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === false) continue;
    element.setAttribute(name, value === true ? "" : String(value));
  }
  append(element, ...children);
  return element;
}

/** Appends children, text as text nodes. */
export function append(parent: Node, ...children: Child[]): void {
  for (const child of children) {
    if (child === false || child === null || child === undefined) continue;
    parent.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
  }
}

/** Replaces all of `parent`'s children. */
export function replaceChildren(parent: Element, ...children: Child[]): void {
  parent.replaceChildren();
  append(parent, ...children);
}

let ids = 0;
/** A fresh element id, for `for=`, `aria-describedby` and the like. */
export function uniqueId(prefix: string): string {
  ids += 1;
  return `${prefix}-${ids}`;
}

/** A labelled form control in a `.field` wrapper, with room for a hint and a problem. */
export function field(
  label: string,
  control: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement,
  hint?: string,
): { wrapper: HTMLElement; problem: HTMLElement } {
  control.id ||= uniqueId("control");
  const problem = h("p", { class: "problem", id: `${control.id}-problem`, hidden: true });
  const hintNode = hint ? h("p", { class: "hint", id: `${control.id}-hint` }, hint) : undefined;
  const described = [hintNode?.id, problem.id].filter(Boolean).join(" ");
  control.setAttribute("aria-describedby", described);
  const wrapper = h(
    "div",
    { class: "field" },
    h("label", { for: control.id }, label),
    control,
    hintNode,
    problem,
  );
  return { wrapper, problem };
}

/** A `<select>` of `[value, label]` options. */
export function select(
  name: string,
  options: ReadonlyArray<readonly [string, string]>,
  value = "",
): HTMLSelectElement {
  const element = h(
    "select",
    { name },
    ...options.map(([optionValue, label]) => h("option", { value: optionValue }, label)),
  );
  element.value = value;
  return element;
}
