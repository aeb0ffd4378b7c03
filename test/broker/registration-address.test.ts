/**
 * The per-address registration count's key (issue 41 §7, src/broker/registration-address.ts):
 * an IPv4 address as itself, an IPv6 address as its network of `ipv6Prefix` bits, an
 * IPv4-mapped IPv6 address as the IPv4 address.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { registrationAddressKey } from '../../src/broker/registration-address.js';

test('IPv4 counts as the address', () => {
  assert.equal(registrationAddressKey('203.0.113.5', 64), '203.0.113.5');
  assert.notEqual(registrationAddressKey('203.0.113.5', 64), registrationAddressKey('203.0.113.6', 64));
});

test('IPv6 counts by its /64: every address of one /64 is one key, another /64 another', () => {
  const key = registrationAddressKey('2001:db8:1:2::a', 64);
  assert.equal(key, '2001:db8:1:2::/64');
  for (const same of ['2001:db8:1:2:ffff:ffff:ffff:ffff', '2001:0DB8:0001:0002:0:0:0:1', '2001:db8:1:2:a:b:c:d%eth0', '2001:db8:1:2::1.2.3.4']) {
    assert.equal(registrationAddressKey(same, 64), key, same);
  }
  assert.equal(registrationAddressKey('2001:db8:1:3::a', 64), '2001:db8:1:3::/64');
  assert.equal(registrationAddressKey('::1', 64), '::/64');
});

test('the prefix is configurable: /48 joins the /64s of a site, /128 is the exact address', () => {
  assert.equal(registrationAddressKey('2001:db8:1:2::a', 48), '2001:db8:1::/48');
  assert.equal(registrationAddressKey('2001:db8:1:3::a', 48), '2001:db8:1::/48');
  assert.equal(registrationAddressKey('2001:db8:1:2::a', 56), '2001:db8:1::/56');
  assert.equal(registrationAddressKey('2001:db8:1:2ff::a', 56), '2001:db8:1:200::/56');
  assert.equal(registrationAddressKey('2001:db8:1:2::a', 128), '2001:db8:1:2::a/128');
  assert.equal(registrationAddressKey('2001:db8:0:0:1:0:0:1', 128), '2001:db8::1:0:0:1/128', 'RFC 5952: the first longest zero run');
  assert.equal(registrationAddressKey('fe80::1:2:3:4', 1), '8000::/1');
});

test('an IPv4-mapped IPv6 address counts as the IPv4 address, in either spelling', () => {
  assert.equal(registrationAddressKey('::ffff:203.0.113.5', 64), '203.0.113.5');
  assert.equal(registrationAddressKey('::FFFF:cb00:7105', 64), '203.0.113.5');
  assert.equal(registrationAddressKey('0:0:0:0:0:ffff:203.0.113.5', 64), '203.0.113.5');
});

test('what is not an address counts as itself', () => {
  assert.equal(registrationAddressKey('', 64), '');
  assert.equal(registrationAddressKey('unix-socket', 64), 'unix-socket');
});
