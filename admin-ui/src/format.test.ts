import { describe, expect, it } from "vitest";

import { age, dateTime, utcOffset, fromCents, fromLocalInput, money, percent, refundable, startOfToday, toCents, toLocalInput, transferReference } from "./format";

describe("money on integer cents", () => {
  it.each([
    ["12.30", 1230n],
    ["12.3", 1230n],
    ["12", 1200n],
    ["0.05", 5n],
    ["-20.50", -2050n],
    [" 7.1 ", 710n],
    ["9999999999.99", 999999999999n],
  ])("parses %s", (s, want) => {
    expect(toCents(s)).toBe(want);
  });

  it.each(["", "abc", "1.234", "1,5", "1e3", "--1", ".5", "1."])("refuses %s", (s) => {
    expect(toCents(s)).toBeNull();
  });

  it("formats with two decimals and a sign", () => {
    expect(fromCents(1230n)).toBe("12.30");
    expect(fromCents(5n)).toBe("0.05");
    expect(fromCents(-2050n)).toBe("-20.50");
    expect(fromCents(0n)).toBe("0.00");
  });

  it("shows an amount that does not parse as it came", () => {
    expect(money("12.3", "CNY")).toBe("12.30 CNY");
    expect(money("n/a")).toBe("n/a");
  });

  it("never offers more than is left to refund", () => {
    expect(refundable("99.00", "10.00")).toBe(8900n);
    expect(refundable("99.00", "")).toBe(9900n);
    expect(refundable("99.00", "99.00")).toBe(0n);
    expect(refundable("10.00", "12.00")).toBe(0n);
  });
});

describe("transfer reference", () => {
  it("is the first 8 characters of the payment id, upper case, as bank_transfer.lua says", () => {
    expect(transferReference("44b14f89-0c1d-4e2f-9a3b-5c6d7e8f9a0b")).toBe("44B14F89");
  });
});

describe("other formats", () => {
  it("shows the service's rate in percent, and no rate as a dash", () => {
    expect(percent(undefined)).toBe("—");
    expect(percent(Number.NaN)).toBe("—");
    expect(percent(0)).toBe("0.0 %");
    expect(percent(0.75)).toBe("75.0 %");
    expect(percent(24 / 25)).toBe("96.0 %");
    expect(percent(1)).toBe("100.0 %");
  });

  it("shows an empty time as a dash and a bad one as it came", () => {
    expect(dateTime("")).toBe("—");
    expect(dateTime("yesterday")).toBe("yesterday");
    expect(dateTime("2026-01-02T03:04:05Z")).toMatch(/^2026-01-0[12] \d\d:\d\d:05 UTC([+-]\d{1,2}(:\d\d)?)?$/);
  });

  it("names the zone of every time by its offset at that instant", () => {
    expect(utcOffset(0)).toBe("UTC");
    expect(utcOffset(480)).toBe("UTC+8");
    expect(utcOffset(-180)).toBe("UTC-3");
    expect(utcOffset(330)).toBe("UTC+5:30");
    expect(utcOffset(-570)).toBe("UTC-9:30");
    expect(utcOffset(Number.NaN)).toBe("UTC");
    const d = new Date("2026-01-02T03:04:05Z");
    expect(dateTime("2026-01-02T03:04:05Z").endsWith(` ${utcOffset(-d.getTimezoneOffset())}`)).toBe(true);
  });

  it("tells an age in its two largest units", () => {
    const at = "2026-05-20T10:00:00Z";
    expect(age(at, "2026-05-20T10:00:00.900Z")).toBe("0 s");
    expect(age(at, "2026-05-20T10:00:45Z")).toBe("45 s");
    expect(age(at, "2026-05-20T10:12:59Z")).toBe("12 min");
    expect(age(at, "2026-05-20T13:00:00Z")).toBe("3 h");
    expect(age(at, "2026-05-20T13:05:00Z")).toBe("3 h 5 min");
    expect(age(at, "2026-05-22T14:30:00Z")).toBe("2 d 4 h");
    expect(age(at, "2026-05-23T10:00:00Z")).toBe("3 d");
    // Another offset, the same instant.
    expect(age("2026-05-20T18:00:00+08:00", "2026-05-20T10:01:00Z")).toBe("1 min");
    expect(age(at, "2026-05-20T09:59:00Z")).toBe("0 s");
    expect(age("", at)).toBe("—");
    expect(age(at, "later")).toBe("—");
  });

  it("starts today at local midnight", () => {
    const d = startOfToday(new Date(2026, 4, 17, 15, 30));
    expect([d.getFullYear(), d.getMonth(), d.getDate(), d.getHours(), d.getMinutes()]).toEqual([2026, 4, 17, 0, 0]);
  });

  it("puts a time into a datetime-local input in local time, and takes it back as UTC", () => {
    // Local time on both sides, whatever the zone the tests run in.
    const local = new Date(2026, 11, 8, 10, 30, 45);
    expect(toLocalInput(local.toISOString())).toBe("2026-12-08T10:30");
    expect(fromLocalInput("2026-12-08T10:30")).toBe(new Date(2026, 11, 8, 10, 30).toISOString());
    expect(fromLocalInput("2026-12-08T10:30:15")).toBe(new Date(2026, 11, 8, 10, 30, 15).toISOString());
    expect(fromLocalInput(toLocalInput(local.toISOString()))).toBe(new Date(2026, 11, 8, 10, 30).toISOString());
    expect(toLocalInput("")).toBe("");
    expect(toLocalInput("soon")).toBe("");
    expect(fromLocalInput("")).toBeNull();
    expect(fromLocalInput("2026-12-08")).toBeNull();
    expect(fromLocalInput("2026-12-08T10:30Z")).toBeNull();
    expect(fromLocalInput("2026-13-45T10:30")).toBeNull();
  });
});
