// A tiny element builder. Text is always set as text (never parsed as HTML),
// so a value from the service or a plugin cannot inject markup; and no inline
// style attribute is ever written, so the page keeps working under a
// Content-Security-Policy without 'unsafe-inline'.

export type Child = Node | string | number | bigint | null | undefined | false | Child[];

type Listener = (ev: Event) => void;

export type Attrs = {
  [name: string]: string | number | boolean | Listener | null | undefined;
};

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs?: Attrs | null,
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [name, value] of Object.entries(attrs)) {
      setAttr(el, name, value);
    }
  }
  append(el, children);
  return el;
}

function setAttr(el: HTMLElement, name: string, value: Attrs[string]): void {
  if (value === undefined || value === null || value === false) {
    return;
  }
  if (name === "style") {
    throw new Error("inline styles are not allowed (CSP); use a class");
  }
  if (name.startsWith("on") && typeof value === "function") {
    el.addEventListener(name.slice(2).toLowerCase(), value);
    return;
  }
  if (typeof value === "function") {
    throw new Error(`attribute ${name} cannot be a function`);
  }
  if (name === "class") {
    el.className = String(value);
    return;
  }
  if (value === true) {
    el.setAttribute(name, "");
    return;
  }
  // value is a property for form controls, an attribute elsewhere.
  if (name === "value" && "value" in el) {
    (el as HTMLInputElement).value = String(value);
    return;
  }
  el.setAttribute(name, String(value));
}

export function append(parent: Node, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) {
      continue;
    }
    if (Array.isArray(child)) {
      append(parent, child);
    } else if (child instanceof Node) {
      parent.appendChild(child);
    } else {
      parent.appendChild(document.createTextNode(String(child)));
    }
  }
}

/** Replaces the children of parent. */
export function replace(parent: Node, ...children: Child[]): void {
  while (parent.firstChild) {
    parent.removeChild(parent.firstChild);
  }
  append(parent, children);
}

let nextId = 0;

/** A document-unique id for label/control and aria-describedby pairs. */
export function uid(prefix: string): string {
  nextId += 1;
  return `${prefix}-${nextId}`;
}
